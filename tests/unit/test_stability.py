"""The stability rule calibrated to sampling error: enough windows, a known mean, no trend (hand-computed values)."""

from __future__ import annotations

import math

import pytest

from recommender.metrics.stability import Stability, describe, judge, spread


def points(values: list[float]) -> list[tuple[float, float]]:
    return [(float(i), v) for i, v in enumerate(values)]


def test_spread_by_hand():
    # mean 100, s = sqrt(200 / 3) = 8.165, SE 4.082 -> 4.08 %; slope b = Sxy / Sxx = -10 / 5 = -2,
    # residual 200 - (-2 x -10) = 180, se(b) = sqrt(180 / 2 / 5) = 4.243, t = -0.471
    s = spread(points([100, 110, 90, 100]))
    assert (s.n, s.mean) == (4, 100)
    assert s.relative_se == pytest.approx(math.sqrt(200 / 3) / 2 / 100)
    assert s.slope_t == pytest.approx(-2 / math.sqrt(18)) and not s.trend


def test_steady_noise_is_stable():
    verdict = judge(
        points([1000, 1020, 985, 1010, 995, 1005]), points([50, 51, 49.5, 50.5, 49, 50.2]), 6, 4, 0.05, "p95"
    )
    assert verdict.stable and verdict.reason == ""
    assert verdict.ipm.relative_se < 0.01 and not verdict.ipm.trend and not verdict.latency.trend


def test_a_ramp_is_not_stable_even_when_its_mean_is_well_known():
    ramp = points([1000, 1010, 1020, 1030, 1040, 1050])  # SE 1 %, well within 5 %, but a perfect line
    verdict = judge(ramp, points([50] * 6), 6, 4, 0.05, "p95")
    assert not verdict.stable and verdict.ipm.trend
    assert verdict.reason.startswith("IPM trends across the windows")


def test_a_noisy_ramp_with_a_significant_slope_is_not_stable():
    # slope 10 per window against noise of +-3: t far above t(0.975, 4) = 2.776
    verdict = judge(points([1000, 1013, 1017, 1033, 1038, 1052]), points([50] * 6), 6, 4, 0.05, "p95")
    assert verdict.ipm.slope_t > 2.776 and not verdict.stable


def test_too_few_windows_is_not_stable():
    verdict = judge(points([1000, 1000, 1000]), points([50, 50, 50]), 3, 4, 0.05, "p95")
    assert not verdict.stable and verdict.reason == "too few windows (3 < 4)"


def test_too_few_windows_with_a_percentile_is_not_stable():
    verdict = judge(points([1000] * 4), points([50, 50]), 4, 4, 0.05, "p99")
    assert verdict.reason == "too few windows with enough samples for p99 (2 < 4)"


def test_a_mean_known_worse_than_the_tolerance_is_not_stable():
    # mean 1000, s = sqrt(180000 / 3) = 244.9, SE 122.5 -> 12.2 % > 5 %
    verdict = judge(points([700, 1300, 1000, 1000]), points([50] * 4), 4, 4, 0.05, "p95")
    assert not verdict.stable and "relative standard error 12.2% > 5%" in verdict.reason


def test_the_numbers_round_trip_and_read_in_one_line():
    verdict = judge(points([1000, 1020, 985, 1010]), points([50, 51, 49.5, 50.5]), 4, 4, 0.05, "p95")
    assert Stability.from_dict(verdict.to_dict()) == verdict and Stability.from_dict(None) is None
    assert describe(verdict, "p95").startswith("stable: n=4 windows, relative SE IPM 0.7%, p95 0.6% (limit 5%)")
    assert describe(None, "p95") == "not judged"
