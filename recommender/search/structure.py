"""The grid's structure: a candidate that cannot be the best is not probed (adaptive search, `search.unimodal`).

Along a unimodal axis (instance count and max batch size by default: throughput rises with the value up to a peak,
then falls), candidates that differ in that axis only form a line. When two probed candidates on a line show a fall
towards an untried candidate c (b, then a nearer to c, with a's probe widened by `margin` below b's), the peak lies on
b's side of a, so c's MaxInvocations is at most a's. c is pruned, never deployed, when that bound, widened by
`margin`, is below the leader's lower bound (racing's rule for a probe, search/racing.py, applied to the bound). A
probe that met no load level counts as 0 IPM. Candidates are probed in the grid's order (each axis ascending), so a
line is walked upwards and its tail is cut once it falls far enough below the leader. A fall made by noise (a flat
axis) costs nothing unless the line's figures are already out of the race.

    cannot_win(candidate, probed, axes, margin, leader_low) -> reason | None   # probed: [(candidate, IPM or None)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from recommender.candidates import Candidate

# axis name in `variants` -> the candidate attribute that holds its value
AXES = {"instance_group_counts": "instance_group_count", "max_batch_sizes": "max_batch_size"}
LABELS = {"instance_group_counts": "instance count", "max_batch_sizes": "max batch size"}


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
