"""Search strategies (docs/design.md "Search"): which candidate the job measures next, and how much.

strategy_for(spec, candidates) -> GridSearch | AdaptiveSearch      # ask() -> Work | None; tell(work, result)
"""

from __future__ import annotations

from recommender.candidates import Candidate
from recommender.search.work import Strategy, Work


def strategy_for(spec, candidates: list[Candidate]) -> Strategy:
    from recommender.search.adaptive import AdaptiveSearch  # Optuna is imported only when adaptive search runs
    from recommender.search.grid import GridSearch

    if spec.search.adaptive:
        return AdaptiveSearch(spec, candidates)
    return GridSearch(candidates, spec.traffic.repeats)


__all__ = ["Strategy", "Work", "strategy_for"]
