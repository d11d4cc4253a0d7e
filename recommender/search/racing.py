"""Racing across candidates: confidence-bound elimination, then successive halving, over the brief measurements.

A candidate stays in the race while its MaxInvocations interval could still contain the best: its upper bound,
widened by `margin` (the brief intervals rest on window-to-window noise only), is not below the leader's lower bound
(the highest lower bound in the race). Of those, at most ceil(n / eta) continue (n = candidates in the race), by
upper bound. A candidate none of whose load levels met the limits is out of the race at once. Pure logic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from recommender.metrics.intervals import Interval


@dataclass(frozen=True)
class Entrant:
    key: str
    name: str
    max_invocations: float | None  # None: no level met the limits
    interval: Interval | None  # of MaxInvocations (None or n=1: no noise estimate)

    @property
    def low(self) -> float:
        return self.interval.low if self._known else self.max_invocations

    def high(self, margin: float) -> float:
        return (self.interval.high if self._known else self.max_invocations) * (1 + margin)

    @property
    def _known(self) -> bool:
        return self.interval is not None and self.interval.known


@dataclass(frozen=True)
class Verdict:
    survivors: tuple[str, ...]  # keys, best upper bound first
    pruned: dict[str, str]  # key -> reason


def race(entrants: list[Entrant], margin: float, eta: int) -> Verdict:
    """Who continues and who is pruned, with the reason in words."""
    pruned = {e.key: "no load level met the latency and error limits in the load search" for e in entrants
              if e.max_invocations is None}
    racing = [e for e in entrants if e.max_invocations is not None]
    if not racing:
        return Verdict((), pruned)
    leader = max(racing, key=lambda e: e.low)
    for e in racing:
        if e.high(margin) < leader.low:
            pruned[e.key] = (f"MaxInvocations {_bounds(e)} (upper bound +{margin:.0%}: {e.high(margin):,.0f}) lies below "
                             f"the lower bound {leader.low:,.0f} of the leader {leader.name}")
    left = sorted((e for e in racing if e.key not in pruned), key=lambda e: (-e.high(margin), e.name))
    keep = max(1, math.ceil(len(racing) / eta))
    for rank, e in enumerate(left[keep:], start=keep + 1):
        pruned[e.key] = (f"successive halving: upper bound {e.high(margin):,.0f} ranks {rank} of {len(left)} still "
                         f"in the race; the top {keep} continue (eta {eta}); MaxInvocations {_bounds(e)}")
    return Verdict(tuple(e.key for e in left[:keep]), pruned)


def _bounds(e: Entrant) -> str:
    if e.interval is None or not e.interval.known:
        return f"{e.max_invocations:,.0f} IPM (no interval)"
    return f"{e.max_invocations:,.0f} IPM [{e.interval.low:,.0f}, {e.interval.high:,.0f}] ({e.interval.label})"
