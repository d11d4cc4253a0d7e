"""A paired run: configurations measured in rounds, alternating, and each judged against a reference by the
differences within rounds (benchmarks/search.py: the picks of adaptive search and Model Analyzer against the grid's
best, issue 37).

Between runs on a shared host the same configuration's MaxInvocations drifts by more than the configurations differ
(the tiny model's grid best read 229,630 to 355,517 IPM across runs), so a pick measured in one run and the grid's
best in another are not comparable. In a paired run every configuration is measured once per round, in an order that
alternates (forward in odd rounds, backward in even ones: A B C, C B A, ...), so a drift over the run falls on all of
them alike, and what changes from round to round cancels in each round's difference.

The verdict on a configuration against the reference: the per-round differences (configuration - reference, over the
rounds where both were within the limits), their mean and its Student-t 95 % interval (metrics/intervals.py
`mean_interval`, n = rounds). "tied" when that interval contains 0, "NOT tied" (below or above) when it does not,
"unknown" with fewer than 2 such rounds.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.metrics.intervals import Interval, mean_interval  # noqa: E402


def order(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The measuring order round by round: `names` forward in odd rounds (1, 3, ...), backward in even ones."""
    return [list(names) if number % 2 else list(reversed(names)) for number in range(1, rounds + 1)]


@dataclass(frozen=True)
class Verdict:
    word: str  # "tied", "NOT tied (below)", "NOT tied (above)" or "unknown"
    difference: Interval | None  # the mean per-round difference (configuration - reference) and its interval
    rounds: int  # rounds where both were within the limits

    def __str__(self) -> str:
        if self.difference is None:
            return f"{self.word} (fewer than 2 rounds with both within the limits: {self.rounds})"
        d = self.difference
        return (
            f"{self.word}: paired difference {d.mean:+,.0f} IPM [{d.low:+,.0f}, {d.high:+,.0f}] "
            f"(95 %, {self.rounds} rounds)"
        )


def judge(reference: Sequence[float | None], other: Sequence[float | None]) -> Verdict:
    """`other` against `reference`, round by round (each: MaxInvocations within the limits, None: outside them or
    failed in that round)."""
    differences = [o - r for r, o in zip(reference, other, strict=True) if r is not None and o is not None]
    if len(differences) < 2:
        return Verdict("unknown", None, len(differences))
    interval = mean_interval(differences)
    if interval.high < 0:
        word = "NOT tied (below)"
    elif interval.low > 0:
        word = "NOT tied (above)"
    else:
        word = "tied"
    return Verdict(word, interval, len(differences))
