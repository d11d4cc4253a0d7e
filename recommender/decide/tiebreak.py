"""Decide, don't only measure (docs/design.md "Definitions": tied; issue 37 item 7): when #1 and #2 are tied, whether
measuring them more can help, whether another paired round fits the budget, and what the extra time bought.

    pair_to_measure(ranking, known_within) -> (winner, runner_up) | None   # #1 and the best one tied with it, not known
    extra_budget(setting, measured_s) -> seconds             # decision.max_extra_seconds, or its default
    round_seconds(results) -> seconds | None                 # one paired round's estimate, from stored stage times
    Extra.of(server_stats)                                    # what a run has had measured more (stored with it)
    bought(ranking, extras) -> sentence | None               # what the extra time bought

Pure: the job (job/tiebreak.py) reads the store, measures, and asks here again after every round.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from recommender.candidates import CandidateResult
from recommender.decide.ranking import RankedCandidate, Ranking, RankInput
from recommender.decide.separation import centre, to_separate

DEFAULT_SHARE = 0.25  # default budget: this share of the seconds the experiment's measurements took ...
DEFAULT_MOST = 300.0  # ... at most this many seconds
ROUND_STAGES = ("deploy", "probe", "teardown")  # what a further repeat costs besides one repeat's share of the load
KEY = "tiebreak"  # where a run keeps its Extra, in its server_stats
KNOWN = 0.05  # known: the relative half-width below which a tie is a fact (traffic.until_known's, when it is set)
FIGURES = ("throughput", "latency")


@dataclass(frozen=True)
class Extra:
    """What a run has had measured more to break a tie: further repeats, their seconds (deploy to teardown), and the
    sentence the last round ended with."""

    repeats: int = 0
    seconds: float = 0.0
    outcome: str | None = None

    @classmethod
    def of(cls, server_stats: Mapping[str, Any] | None) -> Extra:
        return cls(**((server_stats or {}).get(KEY) or {}))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def pair_to_measure(ranking: Ranking, known_within: float = KNOWN) -> tuple[RankedCandidate, RankedCandidate] | None:
    """#1 and the best-ranked candidate tied with it, while measuring more can still tell them apart: both have
    intervals, their figures differ, and they are not both known within +- `known_within` on both figures (then
    their difference is below the precision asked for, and more repeats would only confirm the tie); else None."""
    winner, tied = ranking.winner, ranking.tied
    if winner is None or not tied:
        return None
    separation = to_separate(winner.candidate, tied[0].candidate)
    if separation is None or separation.times == math.inf:
        return None
    return None if _known(winner.candidate, tied[0].candidate, known_within) else (winner, tied[0])


def _known(first: RankInput, second: RankInput, known_within: float) -> bool:
    """Both candidates' throughput and latency intervals within +- `known_within` of their centres."""
    return all(noise(item, figure) <= known_within for item in (first, second) for figure in FIGURES)


def extra_budget(setting: float | None, measured_s: float) -> float:
    """Seconds the tied leaders may be measured more: the setting, else DEFAULT_SHARE of what the experiment's
    measurements took, at most DEFAULT_MOST."""
    return setting if setting is not None else min(DEFAULT_MOST, DEFAULT_SHARE * measured_s)


def measured_seconds(results: Iterable[CandidateResult]) -> float:
    """Seconds the runs' own stages took (their stored stage times; what was measured more is kept apart)."""
    return sum(sum((r.server_stats or {}).get("stages", {}).values()) for r in results)


def spent(results: Iterable[CandidateResult]) -> float:
    """Seconds already spent measuring tied leaders more, over the runs (a resumed job counts what it spent before)."""
    return sum(Extra.of(r.server_stats).seconds for r in results)


def round_seconds(pair: Iterable[CandidateResult]) -> float | None:
    """One paired round's estimate: per candidate its deploy, probe and teardown and one repeat's share of its load,
    from its stored stage times; None when a run has none stored."""
    total = 0.0
    for result in pair:
        stages = (result.server_stats or {}).get("stages")
        if not stages or result.headline is None:
            return None
        total += sum(stages.get(s, 0.0) for s in ROUND_STAGES) + stages.get("load", 0.0) / result.headline.repeats
    return total


def bought(ranking: Ranking, extras: Mapping[str, Extra], known_within: float = KNOWN) -> str | None:
    """What the extra time bought, said of #1 and #2 as they rank now (None: nothing was measured more): separated
    (by how much), tied though both are known within +- `known_within` (their difference is below it), or tied on
    this host's noise."""
    if ranking.winner is None or len(ranking.ranked) < 2:
        return None
    first, second = ranking.winner, ranking.ranked[1]
    rounds = max(extras.get(first.candidate.key, Extra()).repeats, extras.get(second.candidate.key, Extra()).repeats)
    seconds = sum(extra.seconds for extra in extras.values())
    if rounds == 0:
        return None
    more = f"{rounds} more paired repeat{'s' if rounds > 1 else ''} (+{seconds:.0f} s)"
    if not second.tied_with_winner:
        return f"#1 and #2 separated after {more}: {_difference(first.candidate, second.candidate)}"
    separation = to_separate(first.candidate, second.candidate)
    figure = separation.figure if separation else "throughput"
    apart = f"{separation.apart:.1%}" if separation else "unknown"
    if _known(first.candidate, second.candidate, known_within):
        return (
            f"#1 and #2 still tied after {more}: both are known within +-{known_within:.1%} and differ by less than "
            f"that can tell ({apart}); choose between them on other grounds, or ask for more precision "
            "(traffic.until_known.relative_half_width)"
        )
    # both intervals, not #1's alone: the tie is their overlap, and #2's may be the wide one (in a 100-candidate
    # grid, #1's latency was known within +-3.4 % and the two 15.5 % apart, still overlapping through #2's interval)
    spreads = f"#1 +-{noise(first.candidate, figure):.1%}, #2 +-{noise(second.candidate, figure):.1%}"
    return (
        f"#1 and #2 still tied after {more}: their {figure} differs by {apart}, within this host's noise ({spreads}); "
        "measure on a quieter host, or choose between them on other grounds"
    )


def _difference(first: RankInput, second: RankInput) -> str:
    """The figure whose intervals no longer overlap, as #1's difference from #2 with its +- (the half-widths added
    in quadrature)."""
    for figure, unit, higher_better, a, b in (
        ("throughput", "/min", True, first.ipm_interval, second.ipm_interval),
        ("latency", " ms", False, first.latency_interval, second.latency_interval),
    ):
        if a is None or b is None or (a[0] <= b[1] and b[0] <= a[1]):
            continue
        (centre_a, half_a), (centre_b, half_b) = centre(a), centre(b)
        better = (centre_a > centre_b) == higher_better
        who = "#1" if better else "#2"
        return (
            f"{who} better by {abs(centre_a - centre_b):,.1f} +- {math.hypot(half_a, half_b):,.1f}{unit} {figure} "
            f"({centre_a:,.1f} +- {half_a:,.1f} against {centre_b:,.1f} +- {half_b:,.1f})"
        )
    return "#2 is no longer tied with #1 (its intervals are missing)"


def noise(item: RankInput, figure: str) -> float:
    """The relative half-width of a candidate's interval on one figure (inf without one)."""
    bounds = item.ipm_interval if figure == "throughput" else item.latency_interval
    if bounds is None:
        return math.inf
    middle, half = centre(bounds)
    return half / abs(middle) if middle else math.inf
