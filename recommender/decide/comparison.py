"""How a ranked candidate compares with the winner: one typed record per metric, rendered to a sentence at the edge.

A difference is claimed only for a metric whose intervals separate; overlapping intervals are "tied", a metric
without an interval on either side has "no noise estimate (repeats: N)". `Comparison.text` is the sentence the
ranking has always shown; readers that need the parts (the justification) use the fields, never the sentence.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

TIED_TEXT = "indistinguishable from the winner at this noise level"


class Standing(StrEnum):
    """Where the candidate stands against the winner as a whole."""

    WINNER = "recommended"  # it is the winner
    TIED = "tied"  # throughput and latency intervals both overlap the winner's
    COMPARED = "compared"  # compared metric by metric


class Outcome(StrEnum):
    """One metric of the winner against the candidate's."""

    HIGHER = "higher"  # the winner's value is higher, the intervals separate
    LOWER = "lower"  # the winner's value is lower, the intervals separate
    TIED = "tied"  # the intervals overlap
    NO_ESTIMATE = "no estimate"  # an interval is missing on one side


@dataclass(frozen=True)
class MetricComparison:
    label: str  # "cost per million", "p99 latency", "throughput"
    outcome: Outcome
    delta: float | None = None  # |winner - other| / other, for HIGHER and LOWER
    relative: float | None = None  # the candidate against the winner, (other - winner) / winner ("-30% vs #1")

    @property
    def claim(self) -> str:
        return f"{self.delta:.1%} {self.outcome} {self.label}"


@dataclass(frozen=True)
class Comparison:
    """The winner against one candidate (metrics with the same value on both sides, or missing, are left out)."""

    standing: Standing
    metrics: tuple[MetricComparison, ...] = ()
    repeats: int = 1  # the fewer repeats of the two: what a missing noise estimate rests on
    window_noise: bool = False  # a side's intervals are window-to-window noise only

    def metric(self, label: str) -> MetricComparison | None:
        """The comparison on one metric (None where both had the same value, or a value was missing)."""
        return next((m for m in self.metrics if m.label == label), None)

    def of(self, outcome: Outcome | tuple[Outcome, ...]) -> tuple[MetricComparison, ...]:
        wanted = outcome if isinstance(outcome, tuple) else (outcome,)
        return tuple(m for m in self.metrics if m.outcome in wanted)

    @property
    def claims(self) -> tuple[MetricComparison, ...]:
        return self.of((Outcome.HIGHER, Outcome.LOWER))

    @property
    def noise_only(self) -> bool:
        """No metric could be compared: nothing but missing noise estimates."""
        return bool(self.metrics) and all(m.outcome is Outcome.NO_ESTIMATE for m in self.metrics)

    @property
    def differences(self) -> str:
        """The stated differences and what else is known, without the leading "winner has " ("" without claims)."""
        return "; ".join(self._parts()) if self.claims else ""

    @property
    def no_claim(self) -> str:
        """Why no difference is claimed, in words (for a comparison without claims)."""
        return self._noise() if self.noise_only else self.text

    @property
    def text(self) -> str:
        if self.standing is Standing.WINNER:
            return "recommended"
        if self.standing is Standing.TIED:
            return TIED_TEXT
        if self.noise_only:
            return f"{self._noise()}: no difference claimed"
        if self.claims:
            return "winner has " + "; ".join(self._parts())
        return "; ".join(self._parts()) or "same measured values as the winner"

    def _parts(self) -> list[str]:
        parts = []
        if self.claims:
            window = " (window-to-window noise only)" if self.window_noise else ""
            parts.append(", ".join(m.claim for m in self.claims) + window)
        if ties := self.of(Outcome.TIED):
            parts.append("tied on " + ", ".join(m.label for m in ties) + " (intervals overlap)")
        if unknown := self.of(Outcome.NO_ESTIMATE):
            parts.append(f"{self._noise()} for " + ", ".join(m.label for m in unknown))
        return parts

    def __str__(self) -> str:
        return self.text

    def _noise(self) -> str:
        return f"no noise estimate (repeats: {self.repeats})"
