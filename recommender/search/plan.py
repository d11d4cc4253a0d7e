"""How many candidates a job plans to measure, per target: what `recommender plan` estimates and what a run's money
budget is checked against before anything starts.

Grid: every candidate (the first `max_candidates` when set). Adaptive: the candidates it may probe: the sampler's
budget (`search.budget.candidates`, default SAMPLED) when the grid has ranges, else the grid (the budget's count when
smaller), split over the targets in proportion to their share of the grid (rounded up: an upper bound).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Collection

from recommender.candidates import Candidate, target_index
from recommender.spec import ExperimentSpec

SAMPLED = 20  # candidates the sampler proposes when the budget names none (a range's space can be in the hundreds)


def planned_total(spec: ExperimentSpec, grid_size: int) -> int:
    """The most candidates the job starts, out of a grid of `grid_size`."""
    capped = min(grid_size, spec.max_candidates or grid_size)
    if not spec.search.adaptive:
        return capped
    if spec.variants.ranged_axes():  # the space is too large to bound anything: the sampler's budget does
        limit = spec.search.budget.candidates or SAMPLED
        return min(limit, spec.max_candidates or limit)
    return min(spec.search.budget.candidates or capped, capped)


def planned_counts(
    spec: ExperimentSpec, candidates: list[Candidate], skipped: Collection[str] = frozenset()
) -> Counter[int]:
    """The most candidates the job starts per target (index into spec.all_targets); `skipped`: the keys of those
    it skips before starting them (job/refusals.py), which cost nothing (a grid's max_candidates still counts them:
    the job skips them in their place)."""
    total = planned_total(spec, len(candidates))
    if not spec.search.adaptive:
        return Counter(target_index(spec, c) for c in candidates[:total] if c.key not in skipped)
    candidates = [c for c in candidates if c.key not in skipped]
    total = planned_total(spec, len(candidates))
    shares = Counter(target_index(spec, c) for c in candidates)
    if total >= len(candidates):
        return shares
    return Counter({i: min(n, math.ceil(total * n / len(candidates))) for i, n in shares.items()})
