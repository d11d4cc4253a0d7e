"""Repeated measurements: mean with a 95 % Student-t confidence interval, and ties between candidates.

The interval rule (README "Definitions"): Student-t 95 % over the per-repeat level means when there are 3 or more
repeats (n = repeats); with 1 or 2 repeats, over the level's windows when it has 3 or more (n = windows), labelled
"window-to-window noise only (repeats < 3)": it misses what changes between load runs; otherwise "n/a".
Two candidates whose intervals overlap are indistinguishable at this noise level: no "X % better" between them.
An interval is never narrower than the measurement's resolution (`resolution`: one request per window for the
invocation rate, 1 us for a latency): repeats that agree to the request (a closed loop in lock step) give +- one
request per window, never +- 0.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

# Two-sided 95 % Student-t quantiles t(0.975, df) for df = 1..30, then a few anchors (normal at infinity).
_T95 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)
_T95_LARGE = ((40, 2.021), (60, 2.000), (120, 1.980), (1000, 1.962))


def t_quantile_95(df: int) -> float:
    """t(0.975, df): the multiplier of the standard error for a two-sided 95 % interval (conservative between
    anchors)."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if df <= len(_T95):
        return _T95[df - 1]
    value = _T95[-1]
    for anchor, at_anchor in _T95_LARGE:  # the quantile falls with df: use the value at the anchor below
        if df < anchor:
            return value
        value = at_anchor
    return value


def t_quantile(coverage: float, df: int) -> float:
    """The two-sided Student-t quantile: P(|T| <= q) = `coverage` with `df` degrees of freedom (any coverage in
    (0, 1), e.g. 1 - 0.05 / K for K looks). Exact for integer df: the closed form of P(|T| <= t) (Abramowitz and
    Stegun 26.7.3-4), inverted by bisection to 1e-9."""
    if df < 1:
        raise ValueError(f"degrees of freedom must be >= 1, got {df}")
    if not 0.0 < coverage < 1.0:
        raise ValueError(f"coverage must be between 0 and 1, got {coverage}")
    low, high = 0.0, 1.0
    while _t_within(high, df) < coverage:
        low, high = high, high * 2
    while high - low > 1e-9 * high:
        middle = (low + high) / 2
        low, high = (middle, high) if _t_within(middle, df) < coverage else (low, middle)
    return high


def _t_within(t: float, df: int) -> float:
    """P(|T| <= t) for Student's t with integer `df` degrees of freedom."""
    theta = math.atan(t / math.sqrt(df))
    cos2, term, total = math.cos(theta) ** 2, 1.0, 1.0
    if df % 2:  # odd: (2/pi) (theta + sin cos (1 + 2/3 cos^2 + ... + (2*4...(df-3))/(3*5...(df-2)) cos^(df-3)))
        if df == 1:
            return 2 * theta / math.pi
        for k in range(1, (df - 1) // 2):
            term *= cos2 * (2 * k) / (2 * k + 1)
            total += term
        return 2 / math.pi * (theta + math.sin(theta) * math.cos(theta) * total)
    for k in range(1, df // 2):  # even: sin (1 + 1/2 cos^2 + ... + (1*3...(df-3))/(2*4...(df-2)) cos^(df-2))
        term *= cos2 * (2 * k - 1) / (2 * k)
        total += term
    return math.sin(theta) * total


@dataclass(frozen=True)
class Interval:
    """Mean of n values and its 95 % confidence interval (low = high = mean when n == 1: no noise estimate).

    `counts` says what the n values are: "repeats" (per-repeat level means) or "windows" (window-to-window noise only).
    """

    mean: float
    low: float
    high: float
    n: int
    counts: str = "repeats"

    @property
    def known(self) -> bool:
        return self.n >= 2

    @property
    def label(self) -> str:
        """What the interval rests on, e.g. 'n=3 repeats' or 'n=12 windows, window-to-window noise only (repeats <
        3)'."""
        text = f"n={self.n:,} {self.counts}"
        return text + (f", {WINDOW_NOISE}" if self.counts == "windows" else "")

    def overlaps(self, other: Interval) -> bool:
        return self.low <= other.high and other.low <= self.high

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Interval | None:
        return None if not data else cls(**data)


WINDOW_NOISE = "window-to-window noise only (repeats < 3)"
MIN_REPEATS = 3  # repeats for an interval over repeats; below it, windows (at least as many) give the noise-only one


def mean_interval(values: list[float], counts: str = "repeats", resolution: float = 0.0) -> Interval:
    """Mean +- t(0.975, n-1) x s / sqrt(n), s the sample standard deviation, and never less than +- `resolution`
    (the smallest difference the measurement can show)."""
    if not values:
        raise ValueError("no values")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1, counts)
    s = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = max(t_quantile_95(n - 1) * s / math.sqrt(n), resolution)
    return Interval(mean, mean - half, mean + half, n, counts)


def level_interval(
    per_repeat: list[float], per_window: list[float], repeats: int, resolution: float = 0.0
) -> Interval | None:
    """The interval rule: over repeat means (repeats >= 3), else over windows (>= 3, noise only), else None (n/a)."""
    if repeats >= MIN_REPEATS:
        return mean_interval(per_repeat, resolution=resolution) if len(per_repeat) >= MIN_REPEATS else None
    return mean_interval(per_window, "windows", resolution) if len(per_window) >= MIN_REPEATS else None


def tied(a: Interval | None, b: Interval | None) -> bool | None:
    """True when both intervals are known and overlap, False when both are known and apart, None when unknown."""
    if a is None or b is None or not (a.known and b.known):
        return None
    return a.overlaps(b)


def compare(best: Interval | None, other: Interval | None) -> str:
    """How `other` stands against `best`, in words, never claiming a difference inside the noise."""
    verdict = tied(best, other)
    if verdict is None:
        return "n/a (repeats: 1, no noise estimate)"
    if verdict:
        return "tied (indistinguishable at this noise level)"
    assert best is not None and other is not None  # a verdict needs both intervals
    return f"{(other.mean - best.mean) / best.mean:+.0%}" if best.mean else "n/a"
