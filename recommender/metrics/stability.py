"""Stability of one load level, calibrated to the sampling error of its windows (docs/design.md "Stable").

A level is *stable* when
  (a) it has at least `min_windows` steady-state windows (for the latency: windows with enough samples for the
      percentile),
  (b) for IPM and for the percentile latency, the relative standard error of the level mean over its windows,
      s / sqrt(n) / mean, is at most `tolerance` (0.05: the mean is known to about +-10 % at 95 %), and
  (c) neither shows a significant linear trend across the windows: the least-squares slope of the value on the
      window's position in the level, tested with a two-sided 95 % t-test (n - 2 degrees of freedom).
Windows of several repeats are pooled: the position is the window's index within its level, so a warm-up that has
not finished (every repeat rising through the level) is a trend, and repeat-to-repeat spread widens the error.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from recommender.metrics.intervals import t_quantile_95

_FLAT = 1e-12  # relative spread under which a series counts as constant (no trend, no error)


@dataclass(frozen=True)
class Spread:
    """How well one metric's level mean is known: n windows, relative standard error, trend t statistic."""

    n: int
    mean: float | None = None
    relative_se: float | None = None  # s / sqrt(n) / mean; None with fewer than 2 values or a zero mean
    slope_t: float | None = None  # t statistic of the slope across windows; None when not testable (n < 3)
    trend: bool = False  # |slope_t| above t(0.975, n - 2)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Spread:
        return cls(**data) if data else cls(0)


@dataclass(frozen=True)
class Stability:
    """The verdict on one level and the numbers behind it (shown with the figures, never hidden)."""

    stable: bool
    windows: int  # windows at the level (all repeats)
    ipm: Spread
    latency: Spread
    min_windows: int
    tolerance: float
    reason: str = ""  # why not stable ("" when stable)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Stability | None:
        if not data:
            return None
        return cls(
            bool(data["stable"]),
            int(data["windows"]),
            Spread.from_dict(data.get("ipm")),
            Spread.from_dict(data.get("latency")),
            int(data.get("min_windows") or 0),
            float(data.get("tolerance") or 0.0),
            data.get("reason") or "",
        )


def spread(points: list[tuple[float, float]]) -> Spread:
    """Relative standard error of the mean and the slope t statistic of (position, value) points."""
    n = len(points)
    if n == 0:
        return Spread(0)
    values = [y for _, y in points]
    mean = sum(values) / n
    if n < 2 or mean <= 0:
        return Spread(n, mean)
    s = math.sqrt(sum((y - mean) ** 2 for y in values) / (n - 1))
    slope_t = _slope_t(points, mean)
    trend = slope_t is not None and abs(slope_t) > t_quantile_95(n - 2)
    return Spread(n, mean, s / math.sqrt(n) / mean, slope_t, trend)


def _slope_t(points: list[tuple[float, float]], mean_y: float) -> float | None:
    """t = b / se(b) of the least-squares line y = a + b x; None when not testable (n < 3 or one position)."""
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    if n < 3 or sxx == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in points)
    syy = sum((y - mean_y) ** 2 for _, y in points)
    if syy <= _FLAT * n * mean_y**2:
        return 0.0
    slope = sxy / sxx
    residual = max(syy - slope * sxy, 0.0)
    if residual <= _FLAT * syy:
        return math.copysign(math.inf, slope)  # a perfect line: the trend is certain
    return slope / math.sqrt(residual / (n - 2) / sxx)


def judge(
    ipm: list[tuple[float, float]],
    latency: list[tuple[float, float]],
    windows: int,
    min_windows: int,
    tolerance: float,
    percentile: str,
) -> Stability:
    """The stability rule on a level's (position, IPM) and (position, percentile latency) points."""
    a, b = spread(ipm), spread(latency)
    reason = _why_unstable(a, b, windows, min_windows, tolerance, percentile)
    return Stability(not reason, windows, a, b, min_windows, tolerance, reason)


def _why_unstable(
    ipm: Spread, latency: Spread, windows: int, min_windows: int, tolerance: float, percentile: str
) -> str:
    if windows < min_windows:
        return f"too few windows ({windows} < {min_windows})"
    if latency.n < min_windows:
        return f"too few windows with enough samples for {percentile} ({latency.n} < {min_windows})"
    for name, s in (("IPM", ipm), (f"{percentile} latency", latency)):
        if s.relative_se is None or s.relative_se > tolerance:
            shown = "n/a" if s.relative_se is None else f"{s.relative_se:.1%}"
            return f"{name} mean not known well enough (relative standard error {shown} > {tolerance:.0%})"
        if s.trend:
            return f"{name} trends across the windows (slope t = {s.slope_t:.1f}, significant at 95 %)"
    return ""


def describe(stability: Stability | None, percentile: str) -> str:
    """One line with the rule's numbers, e.g. 'stable: n=12 windows, SE IPM 1.2 %, p95 2.0 %; slope t 0.4 / -1.1'."""
    if stability is None:
        return "not judged"
    ipm, latency = stability.ipm, stability.latency
    numbers = (
        f"n={stability.windows} windows, relative SE IPM {_share(ipm.relative_se)}, {percentile} "
        f"{_share(latency.relative_se)} (limit {stability.tolerance:.0%}); slope t IPM {_t(ipm.slope_t)}, "
        f"{percentile} {_t(latency.slope_t)}"
    )
    return f"stable: {numbers}" if stability.stable else f"unstable ({stability.reason}): {numbers}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _t(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


RULE = (
    "a level is stable when it has at least `stability.windows` windows and, for IPM and for the percentile "
    "latency, the relative standard error of the level mean over its windows (s / sqrt(n) / mean) is at most "
    "`stability.tolerance` and the slope across the windows is not significant (t-test, 95 %)."
)
