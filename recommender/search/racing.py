"""Racing across candidates, one probe at a time (the incumbent rule), with successive halving's cap.

Every candidate is probed first (a brief load search); the probes are then judged one at a time, the highest first
(search/adaptive.py), each against the leader: the candidate measured in full so far whose MaxInvocations interval
has the highest lower bound. A generative candidate's figure is its goodput per minute instead (requests within every
SLO: `Headline.objective`), the same rules on it. The candidate is measured in full (the experiment's repeats at
the level its probe found) when its probe could still contain the best:

  1. some load level met the limits, and
  2. its upper bound, widened by `margin` (a probe's interval rests on a few windows of one brief run), is not
     below the leader's lower bound, and it is above the highest upper bound measured in full (a probe that cannot
     reach past a full measurement's interval could at most tie it: the pick, best or tied, would not change), and
  3. successive halving: fewer than ceil(n / eta) candidates were measured in full so far, OR its probe separates
     above every candidate measured in full (its MaxInvocations narrowed by `margin` is above each one's upper
     bound): a candidate shown better than all measured ones is measured in full whatever the cap. One that cannot
     be shown better than them at the probe's precision is pruned once the cap is reached; its grid measurement is
     then expected to tie with theirs (the pick guarantee benchmarks/search.py checks).

Otherwise it is pruned with the reason (which rule, the figures it was judged on). The first candidate with a
meeting level (the best probe) becomes the leader. Pure logic: no store, no clock.
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
    unit: str = "IPM"  # what the figure counts: MaxInvocations, or "good requests/min" (a generative candidate's)

    @property
    def low(self) -> float:
        return self.interval.low if self.interval is not None and self.interval.known else self._point

    def high(self, margin: float) -> float:
        return (self.interval.high if self.interval is not None and self.interval.known else self._point) * (1 + margin)

    @property
    def _point(self) -> float:
        """MaxInvocations; bounds are asked only of entrants whose load search met the limits."""
        assert self.max_invocations is not None, f"{self.name}: no level met the limits, so it has no bounds"
        return self.max_invocations


def keep_count(candidates: int, eta: int) -> int:
    """Successive halving: how many candidates are measured in full (unless a later probe leads)."""
    return max(1, math.ceil(candidates / eta))


def judge(probe: Entrant, full: list[Entrant], margin: float, keep: int) -> tuple[bool, str]:
    """(measure in full?, why): the probe against the candidates measured in full so far."""
    if probe.max_invocations is None:
        return False, "no load level met the latency and error limits in the load search"
    leaders = [e for e in full if e.max_invocations is not None]
    if not leaders:
        return True, f"probe {_bounds(probe)}: the first candidate that met the limits leads"
    leader = max(leaders, key=lambda e: e.low)
    if probe.high(margin) < leader.low:
        return False, (
            f"probe {_bounds(probe)} (upper bound +{margin:.0%}: {probe.high(margin):,.0f}) lies below the "
            f"lower bound {leader.low:,.0f} of the leader {leader.name}"
        )
    top = max(leaders, key=lambda e: e.high(0.0))
    if probe.high(margin) <= top.high(0.0):
        return False, (
            f"probe {_bounds(probe)} could at most tie {top.name}: its upper bound +{margin:.0%} "
            f"({probe.high(margin):,.0f}) is within that full measurement's interval ({_bounds(top)}), so measuring "
            "it in full could not change which candidate is best or tied with the best"
        )
    if probe.max_invocations / (1 + margin) > top.high(0.0):
        return (
            True,
            f"probe {_bounds(probe)} (-{margin:.0%}) is above the upper bound of every candidate measured in full",
        )
    if len(full) >= keep:
        return False, (
            f"successive halving: probe {_bounds(probe)} could still contain the best but (-{margin:.0%}) "
            f"is not above the upper bound {top.high(0.0):,.0f} of {top.name}, and {len(full)} candidates "
            f"(ceil(n / eta) = {keep}) were measured in full already"
        )
    return True, (
        f"probe {_bounds(probe)} is within reach of the leader {leader.name} ({_bounds(leader)}); "
        f"{len(full) + 1} of at most {keep} measured in full"
    )


def _bounds(e: Entrant) -> str:
    if e.interval is None or not e.interval.known:
        return f"{e.max_invocations:,.0f} {e.unit} (no interval)"
    return f"{e.max_invocations:,.0f} {e.unit} [{e.interval.low:,.0f}, {e.interval.high:,.0f}] ({e.interval.label})"
