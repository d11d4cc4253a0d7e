"""The stated 95 % keeps its promise under the stopping rule: AR(1) windows (a loaded server carries its queue from
one window into the next) at lag-1 autocorrelation 0, 0.5 and 0.8, each level measured until known (judged after
every window from the 4th, at most 12) with the project's own stop rule, then decided as the report decides it.
The seed is fixed: the test is deterministic.

Before the fix, the reported interval was the plain t(0.975) one over windows taken as independent: about 93 to 94 %
at rho 0, 70 to 75 % at 0.5, 43 to 52 % at 0.8 (issue 37)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from recommender.metrics.headline import Measured
from recommender.metrics.intervals import assumed_lag1, t_quantile, variance_factor, window_interval
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits
from recommender.metrics.precision import looks_between
from recommender.metrics.rules import Rules, StopRules, WindowRules
from recommender.metrics.stopping import stop_reason
from tests.unit.test_steady import win

PLANNED, FIRST, RUNS = 12, 4, 400
RULES = Rules(Limits("p95", 500, 0.01), WindowRules(stable_windows=FIRST), StopRules(known_within=0.05))
IPM, LATENCY_MS = 12_000.0, 20.0  # true means; 1,000 requests a window (resolution 0.1 %)


def ar1(rng: np.random.Generator, rho: float, n: int) -> np.ndarray:
    """n stationary AR(1) values of unit variance."""
    e = np.empty(n)
    e[0] = rng.standard_normal()
    for t in range(1, n):
        e[t] = rho * e[t - 1] + math.sqrt(1 - rho * rho) * rng.standard_normal()
    return e


def measured_until_known(
    rng: np.random.Generator, rho: float, cv: float, planned: int = PLANNED
) -> tuple[bool, bool, int]:
    """One level: windows until the stop rule says known (or the `planned` last); whether each figure's reported
    interval holds its true mean, and the windows it took."""
    ipm = IPM * (1 + cv * ar1(rng, rho, planned))
    latency = LATENCY_MS * (1 + cv * ar1(rng, rho, planned))
    windows = [win(0, i, float(ipm[i]), float(latency[i]), requests=1000) for i in range(planned)]
    taken = next((k for k in range(1, planned) if stop_reason(windows[:k], {0: planned}, RULES)), planned)
    records = [WindowRecord.of(0, w) for w in windows[:taken]]
    measured = Measured(window_looks=looks_between(RULES.first_look, planned))
    h = decide(records, measured, RULES.limits, RULES.windows).headline
    assert h.ipm_interval is not None and h.latency_interval is not None
    ipm_holds = h.ipm_interval.low <= IPM <= h.ipm_interval.high
    return ipm_holds, h.latency_interval.low <= LATENCY_MS <= h.latency_interval.high, taken


@pytest.mark.parametrize("rho", [0.0, 0.5, 0.8])
@pytest.mark.parametrize("cv", [0.02, 0.05])
@pytest.mark.parametrize("planned", [8, PLANNED])  # 8: a level of stacks.yaml's (15 s of 1.5 s windows after warm-up)
def test_the_interval_keeps_95_percent_under_the_stopping_rule_and_autocorrelation(
    rho: float, cv: float, planned: int
) -> None:
    rng = np.random.default_rng(37)
    runs = [measured_until_known(rng, rho, cv, planned) for _ in range(RUNS)]
    ipm = sum(r[0] for r in runs) / RUNS
    latency = sum(r[1] for r in runs) / RUNS
    both = sum(r[0] and r[1] for r in runs) / RUNS
    assert ipm >= 0.93 and latency >= 0.93, (ipm, latency)  # stated: 95 % each
    assert both >= 0.90, both  # stated: at least 90 % jointly
    if planned == PLANNED:  # the rule still stops early where the windows allow it
        assert any(r[2] < planned for r in runs) or cv > 0.02


def test_the_window_interval_takes_at_least_two_degrees_of_freedom() -> None:
    """A level of 8 windows whose lag-1 estimate leans high (a rising level of experiments/stacks.yaml, measured): the
    effective n is near 1, where one degree of freedom made t(0.99) 31.8 and the interval 12,170 +- 71,580/min."""
    windows = [11840.0, 12040.0, 11720.0, 11840.0, 12200.0, 12040.0, 12680.0, 13000.0]
    interval = window_interval([windows], looks=5)
    assert interval.n_eff is not None and interval.n_eff < 3  # floor(n_eff - 1) alone would be 1
    n, lag1 = len(windows), interval.lag1
    assert lag1 is not None
    f = variance_factor(assumed_lag1(lag1, n), n)
    se = math.sqrt(float(np.var(windows, ddof=1)) * (n - 1) * f / (n * (n - f)))
    half = (interval.high - interval.low) / 2
    assert half == pytest.approx(t_quantile(1 - 0.05 / 5, 2) * se, rel=0.01)  # with 1: 4.6x as wide
