"""The grid's structure: a candidate that cannot be the best is not probed (adaptive search, `search.unimodal`).

Along a unimodal axis (instance count and max batch size by default: throughput rises with the value up to a peak,
then falls), candidates that differ in that axis only form a line. When two probed candidates on a line, a nearer to
the untried candidate c than b, show a clear fall away from the peak (b before a before c in the axis' order, and
a's probe, widened by `margin`, below b's), the peak lies on b's side of a, so c's MaxInvocations is at most a's, which
is below b's: c cannot be the best, and is pruned with that reason, never deployed. A probe that met no load level
counts as 0 IPM. Candidates are probed in the grid's order (each axis ascending), so a line is walked upwards and
its tail is cut once it falls. The rule needs no noise model beyond the racing margin; a wrong "unimodal" for a model
loses at most candidates past a fall larger than the margin.

    cannot_win(candidate, probed, axes, margin) -> reason | None      # probed: [(candidate, MaxInvocations or None)]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from recommender.candidates import Candidate

# axis name in `variants` -> the candidate attribute that holds its value
AXES = {"instance_group_counts": "instance_group_count", "max_batch_sizes": "max_batch_size"}
LABELS = {"instance_group_counts": "instance count", "max_batch_sizes": "max batch size"}


def cannot_win(
    candidate: Candidate, probed: Sequence[tuple[Candidate, float | None]], axes: Sequence[str], margin: float
) -> str | None:
    """Why `candidate` cannot be the best given the probes on its lines (None: it may be)."""
    for axis in axes:
        attribute = AXES[axis]
        value = getattr(candidate, attribute)
        line = {getattr(c, attribute): (c, ipm or 0.0) for c, ipm in probed if _same_but(c, candidate, attribute)}
        for side in (sorted(v for v in line if v < value), sorted((v for v in line if v > value), reverse=True)):
            if len(side) < 2:
                continue
            (b, b_ipm), (a, a_ipm) = line[side[-2]], line[side[-1]]  # a is the nearer to the candidate
            if a_ipm * (1 + margin) < b_ipm:
                return (
                    f"pruned by the grid's structure, not probed: along {LABELS[axis]} (taken as unimodal) "
                    f"MaxInvocations fell from {b_ipm:,.0f} at {b.name} to {a_ipm:,.0f} at {a.name} "
                    f"(more than the {margin:.0%} margin), so {attribute.replace('_', ' ')} {value} lies past the "
                    "peak and cannot be the best"
                )
    return None


def _same_but(one: Candidate, other: Candidate, attribute: str) -> bool:
    """The two candidates differ in `attribute` at most (same engine, batching, target, ...)."""
    return dataclasses.replace(one, **{attribute: getattr(other, attribute)}) == other
