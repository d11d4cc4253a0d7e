"""The grid's structure: a candidate that cannot be the best is not probed (adaptive search, `search.unimodal`).

Along a unimodal axis (instance count and max batch size by default: throughput rises with the value up to a peak,
then falls), candidates that differ in that axis only form a line. When two probed candidates on a line show a fall
towards an untried candidate c (b, then a nearer to c, with a's probe widened by `margin` below b's), the peak lies on
b's side of a, so c's MaxInvocations is at most a's. c is pruned, never deployed, when that bound, widened by
`margin`, is below the leader's lower bound (racing's rule for a probe, search/racing.py, applied to the bound). A
probe that met no load level counts as 0 IPM. Candidates are probed in the grid's order (each axis ascending), so a
line is walked upwards and its tail is cut once it falls far enough below the leader. A fall made by noise (a flat
axis) costs nothing unless the line's figures are already out of the race.

One more piece of structure needs no probe at all: without dynamic batching, Triton executes each request as it
arrives, and every request here is a batch of 1, so the max batch size changes nothing that runs (PyTorch and ONNX
Runtime, whose exports do not depend on it; a TensorRT engine is built for its max batch size and is left out). A
candidate that differs from a probed one only in max batch size, both without dynamic batching, is the same server:
it is pruned with that reason (`same_as`) instead of being deployed again.

    cannot_win(candidate, probed, axes, margin, leader_low) -> reason | None   # probed: [(candidate, IPM or None)]
    same_as(candidate, probed) -> (reason, the twin's IPM) | None
    Climb(candidates, axes).next(known) -> the next candidate to probe | None; .unreached(candidate, known) -> reason
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from recommender.candidates import Candidate

# axis name in `variants` -> the candidate attribute that holds its value
AXES = {"instance_group_counts": "instance_group_count", "max_batch_sizes": "max_batch_size"}
LABELS = {"instance_group_counts": "instance count", "max_batch_sizes": "max batch size"}
BATCH_FREE = frozenset({"pt", "onnx"})  # Triton engines whose export and execution do not depend on max batch size


def cannot_win(
    candidate: Candidate,
    probed: Sequence[tuple[Candidate, float | None]],
    axes: Sequence[str],
    margin: float,
    leader_low: float | None,
) -> str | None:
    """Why `candidate` cannot be the best given the probes on its lines and the leader's lower bound (None: it may
    be, or there is no leader yet)."""
    if leader_low is None:
        return None
    for axis in axes:
        attribute = AXES[axis]
        value = getattr(candidate, attribute)
        line = {getattr(c, attribute): (c, ipm or 0.0) for c, ipm in probed if _same_but(c, candidate, attribute)}
        for side in (sorted(v for v in line if v < value), sorted((v for v in line if v > value), reverse=True)):
            if len(side) < 2:
                continue
            (b, b_ipm), (a, a_ipm) = line[side[-2]], line[side[-1]]  # a is the nearer to the candidate
            if a_ipm * (1 + margin) < b_ipm and a_ipm * (1 + margin) < leader_low:
                return (
                    f"pruned by the grid's structure, not probed: along {LABELS[axis]} (taken as unimodal) "
                    f"MaxInvocations fell from {b_ipm:,.0f} at {b.name} to {a_ipm:,.0f} at {a.name}, so at "
                    f"{attribute.replace('_', ' ')} {value} it is at most {a_ipm:,.0f} (+{margin:.0%}: "
                    f"{a_ipm * (1 + margin):,.0f}), below the leader's lower bound {leader_low:,.0f}"
                )
    return None


def _same_but(one: Candidate, other: Candidate, attribute: str) -> bool:
    """The two candidates differ in `attribute` at most (same engine, batching, target, ...)."""
    return dataclasses.replace(one, **{attribute: getattr(other, attribute)}) == other


def same_as(candidate: Candidate, probed: Sequence[tuple[Candidate, float | None]]) -> tuple[str, float | None] | None:
    """Why `candidate` need not be deployed, and the probed twin's IPM: a probed candidate is the same server (None:
    none is)."""
    if candidate.dynamic_batching is not None or candidate.optimization not in BATCH_FREE:
        return None
    twin = next(((c, ipm) for c, ipm in probed if c != candidate and _same_but(c, candidate, "max_batch_size")), None)
    if twin is None:
        return None
    return (
        f"pruned by the grid's structure, not probed: without dynamic batching every request (a batch of 1) runs "
        f"alone, so max batch size {candidate.max_batch_size} serves exactly as {twin[0].name} (probed) does",
        twin[1],
    )


class Climb:
    """The order adaptive search probes a grid in, along its unimodal axes: slice by slice (a slice: the candidates
    that differ only in those axes), a climb by coordinate ascent from a start to a point where no axis rises.

    The first slice starts in the middle of each axis, every later one where the best probe so far lies. On the
    current axis both neighbours of the point are probed and the climb steps towards the higher one while it is
    higher (one probe per step), then turns to the next axis; a slice is done when a turn through every axis moves
    nowhere. Candidates no climb reached are not probed (`unreached` says why). Taken as unimodal, each axis rises to
    one peak and falls, so a line's values past the point where its climb stopped lie below it; across slices, the
    batching and engine settings move the best point little (the replay's grid, docs/benchmarks.md "Replay"). Both
    are assumptions, stated in the reason; `search.unimodal: []` probes every candidate.

        climb.next(known) -> Candidate | None    # known: candidate key -> probe IPM (0 if no level met), as told
    """

    def __init__(self, candidates: Sequence[Candidate], axes: Sequence[str]) -> None:
        self.attributes = [AXES[axis] for axis in axes]
        self.labels = [LABELS[axis] for axis in axes]
        self.slices: dict[str, dict[tuple[int, ...], Candidate]] = {}
        for candidate in candidates:
            self.slices.setdefault(self._slice(candidate), {})[self._point(candidate)] = candidate
        self.values = [sorted({p[i] for s in self.slices.values() for p in s}) for i in range(len(self.attributes))]
        self.order = list(self.slices)
        self.current: tuple[int, ...] | None = None  # the point the climb stands on in the first open slice
        self.axis, self.still = 0, 0  # the axis searched now; axes searched in a row without a step
        self.stops: dict[str, Candidate] = {}  # slice -> where its climb stopped
        self.probed: set[str] = set()  # keys of candidates really probed (a slice starts at the best of them)

    def next(self, known: dict[str, float]) -> Candidate | None:
        """The next candidate to probe (or to rule on), None when every slice's climb has stopped."""
        while self.order:
            points = self.slices[self.order[0]]
            if self.current is None:
                self.current, self.axis, self.still = self._start(points, known), 0, 0
            here = points[self.current]
            if here.key not in known:
                return here
            line = self._line(points, self.current, self.axis)
            waiting = [points[p] for p in line if points[p].key not in known]
            if waiting:
                return waiting[0]
            higher = max(line, key=lambda p: known[points[p].key], default=None)
            if higher is not None and known[points[higher].key] > known[here.key]:
                self.current, self.still = higher, 0  # a step: the same axis goes on from there
                continue
            self.still += 1
            self.axis = (self.axis + 1) % len(self.attributes)
            if self.still >= len(self.attributes):
                self.stops[self.order.pop(0)], self.current = here, None
        return None

    def unreached(self, candidate: Candidate, known: dict[str, float]) -> str:
        """Why a candidate no climb reached is not probed."""
        stop = self.stops.get(self._slice(candidate))
        where = f"{stop.name} ({known.get(stop.key, 0.0):,.0f} IPM)" if stop is not None else "another point"
        return (
            f"pruned by the grid's structure, not probed: along {' and '.join(self.labels)} (taken as unimodal) the "
            f"climb in its slice stopped at {where}, where no neighbour was higher, and did not pass this candidate"
        )

    def _start(self, points: dict[tuple[int, ...], Candidate], known: dict[str, float]) -> tuple[int, ...]:
        probed = [c for s in self.slices.values() for c in s.values() if c.key in self.probed]
        if probed:
            best = self._point(max(probed, key=lambda c: known.get(c.key, 0.0)))
            if best in points:
                return best
        middle = tuple(values[(len(values) - 1) // 2] for values in self.values)
        return min(points, key=lambda p: sum(abs(self._rank(i, p[i]) - self._rank(i, m)) for i, m in enumerate(middle)))

    def _line(
        self, points: dict[tuple[int, ...], Candidate], point: tuple[int, ...], axis: int
    ) -> list[tuple[int, ...]]:
        """The point's neighbours along `axis` (one step down, one step up) that are in the slice."""
        rank, found = self._rank(axis, point[axis]), []
        for step in (-1, 1):
            if 0 <= rank + step < len(self.values[axis]):
                near = (*point[:axis], self.values[axis][rank + step], *point[axis + 1 :])
                if near in points:
                    found.append(near)
        return found

    def _rank(self, axis: int, value: int) -> int:
        return self.values[axis].index(value)

    def _slice(self, candidate: Candidate) -> str:
        zeroed: dict[str, Any] = dict.fromkeys(self.attributes, 0)
        return dataclasses.replace(candidate, **zeroed).key

    def _point(self, candidate: Candidate) -> tuple[int, ...]:
        return tuple(getattr(candidate, attribute) for attribute in self.attributes)
