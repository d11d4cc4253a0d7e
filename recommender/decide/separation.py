"""What separating two tied candidates would take: how many times the measurement so far each would need for one
figure's intervals to stop overlapping, if the difference measured holds (docs/design.md "Definitions": tied).

    to_separate(winner, other) -> Separation | None     # None: a figure without an interval on either side

An interval's half-width falls as 1 / sqrt(n) (the t quantile falls too, so this is on the long side): the
intervals of two figures d apart with half-widths h1 and h2 separate after about ((h1 + h2) / d)^2 times the n
measured. A difference of zero is never separated by measuring more.
"""

from __future__ import annotations

from dataclasses import dataclass

from recommender.decide.ranking import Bounds, RankInput

PRACTICAL = 20.0  # more than this many times the measurement: not worth measuring on this host's noise


@dataclass(frozen=True)
class Separation:
    figure: str  # "throughput" or "latency": the one that separates first
    times: float  # times the measurement so far, for each candidate (inf: the same figure, nothing separates them)
    apart: float  # the relative difference of the interval centres

    @property
    def text(self) -> str:
        if self.times == float("inf"):
            return "they measured the same throughput and latency: measuring more cannot separate them"
        if self.times > PRACTICAL:
            return (
                f"separating them would take more than {PRACTICAL:g} times this measurement each ({self.figure} "
                f"{self.apart:.1%} apart): on this host's noise the difference is too small to decide on; choose on "
                "other grounds"
            )
        return (
            f"separating them would take about {self.times:.1f} times this measurement each, if the {self.apart:.1%} "
            f"{self.figure} difference holds"
        )


def to_separate(winner: RankInput, other: RankInput) -> Separation | None:
    """The figure whose intervals separate first with more measurement, and how much more; None without intervals."""
    pairs = (
        ("throughput", winner.ipm_interval, other.ipm_interval),
        ("latency", winner.latency_interval, other.latency_interval),
    )
    if any(a is None or b is None for _, a, b in pairs):
        return None
    found = [_effort(name, a, b) for name, a, b in pairs if a is not None and b is not None]
    return min(found, key=lambda s: s.times)


def _effort(figure: str, a: Bounds, b: Bounds) -> Separation:
    (centre_a, half_a), (centre_b, half_b) = centre(a), centre(b)
    apart = abs(centre_a - centre_b)
    relative = apart / max(abs(centre_a), abs(centre_b)) if apart else 0.0
    times = ((half_a + half_b) / apart) ** 2 if apart else float("inf")
    return Separation(figure, max(times, 1.0), relative)


def centre(bounds: Bounds) -> tuple[float, float]:
    """An interval's centre and half-width."""
    low, high = bounds
    return (low + high) / 2, (high - low) / 2
