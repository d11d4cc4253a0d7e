"""Repeated measurements: mean with a 95 % Student-t confidence interval, and ties between candidates.

The interval rule (README "Definitions"): Student-t 95 % over the per-repeat level means when there are 3 or more
repeats (n = repeats); with 1 or 2 repeats, over the level's windows when it has 3 or more (n = windows), labelled
"window-to-window noise only (repeats < 3)": it misses what changes between load runs; otherwise "n/a".
Windows of one load run are not independent (a loaded server carries its queue from one window into the next): the
window interval rests on an effective n from their lag-1 autocorrelation (`window_interval`), stored and shown.
Measured until known, an interval is at the level the stopping rule kept over its looks (`looks`: the Bonferroni
quantile t(1 - 0.05 / K)), so it keeps its 95 % whichever look stopped. Each figure's interval is 95 %;
MaxInvocations and ModelLatency both inside theirs: at least 90 % (JOINT).
Two candidates whose intervals overlap are indistinguishable at this noise level: no "X % better" between them.
An interval is never narrower than the measurement's resolution (`resolution`: one request per window for the
invocation rate, 1 us for a latency): repeats that agree to the request (a closed loop in lock step) give +- one
request per window, never +- 0.
"""

from __future__ import annotations

import itertools
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


ALPHA = 0.05  # what every interval may miss: 95 % per figure (over all of a level's looks, measured until known)
JOINT = "95 % each; MaxInvocations and ModelLatency both inside theirs: at least 90 %"


@dataclass(frozen=True)
class Interval:
    """Mean of n values and its 95 % confidence interval (low = high = mean when n == 1: no noise estimate).

    `counts` says what the n values are: "repeats" (per-repeat level means) or "windows" (window-to-window noise only).
    `looks`: the stopping rule's looks it is corrected for (t(1 - 0.05 / looks); 1: a plain 95 % interval).
    `lag1` / `n_eff` (windows only): the windows' lag-1 autocorrelation and the effective n the interval rests on.
    """

    mean: float
    low: float
    high: float
    n: int
    counts: str = "repeats"
    looks: int = 1
    lag1: float | None = None
    n_eff: float | None = None

    @property
    def known(self) -> bool:
        return self.n >= 2

    @property
    def label(self) -> str:
        """What the interval rests on, e.g. 'n=3 repeats' or 'n=12 windows (effective n 4.2, lag-1 autocorrelation
        0.31), window-to-window noise only (repeats < 3)', and the looks it is corrected for."""
        text = f"n={self.n:,} {self.counts}"
        if self.n_eff is not None:
            shown = "n/a" if self.lag1 is None else f"{self.lag1:.2f}"
            text += f" (effective n {self.n_eff:.1f}, lag-1 autocorrelation {shown})"
        if self.looks > 1:
            text += f", 95 % over {self.looks} looks"
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
RULE = (
    f"Student-t over the per-repeat level means with {MIN_REPEATS} or more repeats (n = repeats); with 1 or 2 repeats "
    f"over the level's windows when it has {MIN_REPEATS} or more (n = windows, {WINDOW_NOISE}), on an effective n "
    "from the windows' lag-1 autocorrelation (adjacent windows of a loaded server are not independent); otherwise "
    "n/a. Measured until known, at the level the stopping rule kept over its looks (t(1 - 0.05 / K), K looks), so "
    f"it holds whichever look stopped. {JOINT}. A difference between candidates is stated only where their "
    "intervals separate."
)
MAX_LAG1 = 0.95  # the most autocorrelation the window interval assumes (the effective n stays above 1)
# The fewest degrees of freedom the window interval's t quantile takes. At an effective n below 3 the rule gives 1, and
# t(1) is 12.7 (31.8 corrected for 5 looks) against 4.3 (7.0) at 2: a level of 8 windows whose estimate leaned high
# read 12,170 +- 71,580/min. With 2, the coverage simulation (tests/unit/test_coverage.py, also at 8 windows a level)
# holds the same 97 % and more at every rho: the assumed correlation, raised by its standard error, is what carries
# the coverage, not the last degree of freedom.
MIN_DF = 2


def mean_interval(values: list[float], counts: str = "repeats", resolution: float = 0.0, looks: int = 1) -> Interval:
    """Mean +- t(1 - 0.05 / looks, n-1) x s / sqrt(n) (t(0.975, n-1) for one look), s the sample standard deviation,
    and never less than +- `resolution` (the smallest difference the measurement can show)."""
    if not values:
        raise ValueError("no values")
    n = len(values)
    mean = sum(values) / n
    if n == 1:
        return Interval(mean, mean, mean, 1, counts, looks)
    s = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    half = max(_quantile(looks, n - 1) * s / math.sqrt(n), resolution)
    return Interval(mean, mean - half, mean + half, n, counts, looks)


def window_interval(runs: list[list[float]], resolution: float = 0.0, looks: int = 1) -> Interval:
    """The interval of the mean of windows that follow each other (`runs`: each load run's windows in order; pairs
    are taken within a run), with autocorrelation accounted for.

    Adjacent windows of a loaded server are correlated, and n of them then say less than n independent ones: the
    mean's variance is s^2 (n-1) f / (n (n-f)), f = 1 + 2 sum_k (1 - k/n) rho^k for AR(1) windows (the (n-1)/(n-f)
    undoes the shrinking of s by the correlation), on n_eff = n / f with floor(n_eff - 1) degrees of freedom (at
    least MIN_DF). rho is `assumed_lag1` of the estimate: from a dozen windows it cannot be told apart from a lucky
    stretch, so the interval takes the upper side (the coverage test: tests/unit/test_coverage.py)."""
    values = [v for run in runs for v in run]
    n = len(values)
    if n < 3:
        return mean_interval(values, "windows", resolution, looks)
    mean = sum(values) / n
    squares = sum((v - mean) ** 2 for v in values)
    pairs = sum((a - mean) * (b - mean) for run in runs for a, b in itertools.pairwise(run))
    lag1 = pairs / squares if squares > 0 else 0.0
    f = variance_factor(assumed_lag1(lag1, n), n)
    s2 = squares / (n - 1)
    se = math.sqrt(s2 * (n - 1) * f / (n * (n - f)))
    half = max(_quantile(looks, max(MIN_DF, math.floor(n / f - 1))) * se, resolution)
    return Interval(mean, mean - half, mean + half, n, "windows", looks, round(lag1, 4), round(n / f, 2))


def assumed_lag1(estimate: float, n: int) -> float:
    """The lag-1 autocorrelation the window interval assumes: the estimate corrected for its small-sample bias
    (E[r] ~ rho - (1 + 4 rho) / n, Kendall) and raised by one standard error sqrt((1 - rho^2) / n), within [0,
    MAX_LAG1]."""
    rho = min(max(estimate + (1 + 4 * max(estimate, 0.0)) / n, 0.0), MAX_LAG1)
    return min(rho + math.sqrt((1 - rho * rho) / n), MAX_LAG1)


def variance_factor(rho: float, n: int) -> float:
    """n x Var(mean) / Var(one window) for n AR(1) windows of lag-1 autocorrelation rho (1 when independent)."""
    return 1 + 2 * sum((1 - k / n) * rho**k for k in range(1, n))


def _quantile(looks: int, df: int) -> float:
    return t_quantile_95(df) if looks <= 1 else t_quantile(1 - ALPHA / looks, df)


def level_interval(
    per_repeat: list[float],
    per_window: list[list[float]],
    repeats: int,
    resolution: float = 0.0,
    looks: int = 1,
    repeat_looks: int = 1,
) -> Interval | None:
    """The interval rule: over repeat means (repeats >= 3, corrected for `repeat_looks`), else over windows (>= 3,
    noise only, `per_window`: each repeat's in order, corrected for `looks`), else None (n/a)."""
    if repeats >= MIN_REPEATS:
        if len(per_repeat) < MIN_REPEATS:
            return None
        return mean_interval(per_repeat, resolution=resolution, looks=repeat_looks)
    if sum(len(run) for run in per_window) < MIN_REPEATS:
        return None
    return window_interval(per_window, resolution, looks)


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
