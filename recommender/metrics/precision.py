"""Measure until known: a load level (or a run's repeats) ends as soon as its figures are known to the precision the
experiment asks for (`traffic.until_known`), judged after every window (or every repeat) with a correction for the
repeated looks.

The rule (README "Definitions"): after each look, the relative half-width of the interval of the mean of
MaxInvocations and of the latency percentile, over the level's windows (or the repeats' level means), must be at
most `relative_half_width`. The interval at each look is the one the figures report (metrics/intervals.py): over
windows with their autocorrelation accounted for (`window_interval`), at the (1 - 0.05 / K) Student-t quantile, K
the most looks the level can have (Bonferroni over the looks): the chance that any look stops on an interval that
misses the mean stays at 5 % or below, whichever look stops, and the interval reported after the stop is that same
interval. It is never narrower than the measurement's resolution (one request per window; 1 us). Pure: the load
child calls `window_precision` at the end of every window; the measurement calls `repeat_precision` after every
repeat.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from recommender.metrics.intervals import ALPHA, Interval, t_quantile, window_interval

LATENCY_RESOLUTION_MS = 0.001  # latencies are recorded in whole microseconds


@dataclass(frozen=True)
class LookPrecision:
    """Relative half-widths at one look (None: fewer than 2 values or a zero mean), and the n they rest on."""

    ipm: float | None
    latency: float | None
    n: int
    looks: int

    def within(self, target: float) -> bool:
        return self.ipm is not None and self.latency is not None and self.ipm <= target and self.latency <= target

    def text(self, percentile: str) -> str:
        shown = lambda v: "n/a" if v is None else f"+-{v:.1%}"
        return (
            f"MaxInvocations {shown(self.ipm)}, {percentile} {shown(self.latency)} over n={self.n} "
            f"(95 % interval corrected for {self.looks} looks)"
        )


def relative_half_width(values: Sequence[float], looks: int, resolution: float = 0.0) -> float | None:
    """Half-width of the interval of the mean of `values` (windows in order: `window_interval`, corrected for
    `looks`), over the mean; never below `resolution` (in the values' unit). None for fewer than 2 values or a zero
    mean."""
    if len(values) < 2:
        return None
    interval = window_interval([list(values)], resolution, max(1, looks))
    if interval.mean <= 0:
        return None
    return (interval.high - interval.low) / 2 / interval.mean


def spread(
    ipms: Sequence[float], latencies: Sequence[float | None], looks: int, ipm_resolution: float
) -> LookPrecision:
    """Both figures' relative half-widths (a latency of None, a window too small for the percentile, is left out)."""
    known = [v for v in latencies if v is not None]
    return LookPrecision(
        relative_half_width(ipms, looks, ipm_resolution),
        relative_half_width(known, looks, LATENCY_RESOLUTION_MS),
        len(ipms),
        looks,
    )


def repeat_spread(ipm: Interval | None, latency: Interval | None, looks: int) -> LookPrecision:
    """The precision over repeats, from the decided level's intervals over repeat means (metrics/intervals.py),
    widened from the looks they are corrected for to `looks`."""
    n = ipm.n if ipm is not None else 0
    return LookPrecision(_widened(ipm, looks), _widened(latency, looks), n, looks)


def _widened(interval: Interval | None, looks: int) -> float | None:
    if interval is None or interval.n < 2 or interval.mean <= 0:
        return None
    df = interval.n - 1
    scale = t_quantile(1 - ALPHA / max(1, looks), df) / t_quantile(1 - ALPHA / max(1, interval.looks), df)
    return (interval.high - interval.low) / 2 * scale / interval.mean


def looks_between(first: int, last: int) -> int:
    """How many looks a level has when it is judged after its `first`th through its `last`th window (or repeat)."""
    return max(1, last - first + 1)
