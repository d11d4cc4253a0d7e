"""Confidence intervals over repeats and ties, with hand-computed values."""

import math

import pytest

from recommender.metrics.intervals import Interval, compare, mean_interval, t_quantile_95, tied


def test_interval_of_three_repeats():
    # mean 110, s = 10, t(0.975, 2) = 4.303: half-width 4.303 x 10 / sqrt(3) = 24.843
    interval = mean_interval([100, 110, 120])
    assert interval.mean == 110 and interval.n == 3
    assert (interval.low, interval.high) == pytest.approx((85.157, 134.843), abs=1e-3)


def test_interval_of_two_repeats():
    # s = 14.142, t(0.975, 1) = 12.706: half-width 12.706 x 14.142 / sqrt(2) = 127.06
    interval = mean_interval([1000, 1020])
    assert (interval.low, interval.high) == pytest.approx((882.94, 1137.06), abs=1e-2)


def test_one_repeat_has_no_noise_estimate():
    interval = mean_interval([500])
    assert (interval.low, interval.high, interval.known) == (500, 500, False)
    assert tied(interval, mean_interval([400, 410])) is None
    assert compare(interval, interval) == "n/a (repeats: 1, no noise estimate)"


@pytest.mark.parametrize(
    ("df", "t"),
    [
        (1, 12.706),
        (2, 4.303),
        (10, 2.228),
        (30, 2.042),
        (35, 2.042),
        (45, 2.021),
        (100, 2.000),
        (500, 1.980),
        (10_000, 1.962),
    ],
)
def test_t_quantiles(df, t):
    assert t_quantile_95(df) == t


def test_overlapping_intervals_are_tied_and_never_called_better():
    best, close, far = Interval(1050, 1000, 1100, 3), Interval(1000, 950, 1010, 3), Interval(800, 780, 820, 3)
    assert tied(best, close) is True
    assert compare(best, close) == "tied (indistinguishable at this noise level)"
    assert tied(best, far) is False
    assert compare(best, far) == "-24%"  # (800 - 1050) / 1050


def test_dict_round_trip():
    interval = mean_interval([1.0, 2.0, 4.0])
    assert Interval.from_dict(interval.to_dict()) == interval and Interval.from_dict(None) is None
    assert math.isclose(interval.mean, 7 / 3)
