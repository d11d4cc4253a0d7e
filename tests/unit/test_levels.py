"""The decision-time estimator on synthetic windows and repeats: levels, verdicts, MaxInvocations, intervals."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from recommender.metrics.headline import Headline, Measured
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits

RULES = Limits("p95", 500, 0.01)
NOISE = (1.00, 1.01, 0.99, 1.005)  # window-to-window wobble of a steady level (4 windows)


def window(
    repeat: int,
    phase: int,
    index: int,
    ipm: float,
    p95: float | None,
    load: float | None = None,
    requests: int = 200,
    errors: int = 0,
) -> WindowRecord:
    latency = {"p50": None if p95 is None else p95 / 2, "p90": p95, "p95": p95, "p99": None}
    return WindowRecord(
        repeat,
        phase,
        index,
        float(phase + 1 if load is None else load),
        requests,
        errors,
        requests - errors,
        ipm,
        latency,
    )


def level(repeat: int, phase: int, ipm: float, p95: float, windows: int = 4, **kw) -> list[WindowRecord]:
    return [window(repeat, phase, i, ipm * NOISE[i % 4], p95, **kw) for i in range(windows)]


def headline(records: list[WindowRecord], repeats: int, rules: Limits = RULES, **measured) -> Headline:
    return decide(records, Measured(repeats=repeats, **measured), rules).headline


def test_max_invocations_is_the_mean_of_the_highest_meeting_level_not_its_best_window():
    records = level(0, 0, 600, 20) + level(0, 1, 1000, 40) + level(0, 2, 1100, 900)
    h = headline(records, 1)
    assert h.within_threshold and h.phase_index == 1 and h.level_load == 2
    assert h.max_invocations == pytest.approx(1000 * sum(NOISE) / 4)  # not 1010, the best window
    assert h.model_latency_ms == 40 and h.samples == 800 and h.windows.at_level == 4


def test_one_repeat_gets_a_window_noise_interval_labelled_as_such():
    h = headline(level(0, 0, 1000, 40), 1)
    ipm = [1000 * n for n in NOISE]
    mean = sum(ipm) / 4
    s = math.sqrt(sum((v - mean) ** 2 for v in ipm) / 3)
    assert h.ipm_interval.counts == "windows" and h.ipm_interval.n == 4
    # autocorrelation accounted for, by hand: r = sum of adjacent products / sum of squares = -0.6929; assumed
    # rho = min(max(r + (1 + 4 max(r, 0)) / 4, 0), 0.95) = 0 raised by sqrt((1 - 0) / 4) = 0.5; f = 1 + 2 (3/4 x 0.5
    # + 2/4 x 0.25 + 1/4 x 0.125) = 2.0625; se = s sqrt(3 f / (4 (4 - f))); effective n 4 / f = 1.94, df
    # floor(0.94) = 0, taken as MIN_DF = 2: t(0.975, 2) = 4.303
    d = [v - mean for v in ipm]
    assert sum(a * b for a, b in itertools.pairwise(d)) / sum(v * v for v in d) == pytest.approx(-0.6929, abs=1e-4)
    assert h.ipm_interval.low == pytest.approx(mean - 4.303 * s * math.sqrt(3 * 2.0625 / (4 * (4 - 2.0625))), rel=1e-4)
    assert (h.ipm_interval.n_eff, h.ipm_interval.lag1) == (1.94, pytest.approx(-0.6929, abs=1e-4))
    assert h.ipm_interval.label == (
        "n=4 windows (effective n 1.9, lag-1 autocorrelation -0.69), window-to-window noise only (repeats < 3)"
    )


def test_one_repeat_with_two_windows_has_no_interval():
    h = headline(level(0, 0, 1000, 40, windows=2), 1)
    assert h.ipm_interval is None and h.latency_interval is None and h.within_threshold


def test_two_repeats_still_give_only_the_window_noise_interval():
    h = headline(level(0, 0, 1000, 40) + level(1, 0, 1100, 42), 2)
    assert (h.ipm_interval.counts, h.ipm_interval.n) == ("windows", 8)


def test_three_repeats_give_an_interval_over_the_repeat_means():
    # repeat means 1000, 1100, 1200 (x mean noise 1.00375): s = 100.375, t(0.975, 2) = 4.303
    records = [w for r, ipm in enumerate([1000, 1100, 1200]) for w in level(r, 0, ipm, 40)]
    h = headline(records, 3)
    scale = sum(NOISE) / 4
    assert (h.ipm_interval.n, h.ipm_interval.counts, h.ipm_interval.label) == (3, "repeats", "n=3 repeats")
    assert h.ipm_interval.mean == pytest.approx(1100 * scale)
    assert h.ipm_interval.high - h.ipm_interval.mean == pytest.approx(4.303 * 100 * scale / math.sqrt(3))
    assert h.max_invocations == pytest.approx(1100 * scale)


def test_a_failing_repeat_counts_in_the_mean_and_is_reported():
    # level 1: repeats 0 and 1 at 100 ms, repeat 2 at 700 ms -> mean 300 ms <= 500: the level meets, 1 of 3 breached
    records = [w for r in range(3) for w in level(r, 0, 600, 20)]
    records += level(0, 1, 1000, 100) + level(1, 1, 1000, 100) + level(2, 1, 900, 700)
    h = headline(records, 3)
    assert h.phase_index == 1 and h.model_latency_ms == pytest.approx(300)
    assert h.repeats_breached == 1 and "1 of 3 repeats breached at load 2 on their own" in h.notes


def test_a_meeting_level_above_breaching_ones_is_chosen_and_the_levels_below_are_named():
    # loads 1 and 2 meet, 4 and 8 breach (p95 600 and 1,050 ms), 16 meets again: the highest meeting level, 16, with
    # the breaching loads below it kept (a grid's full ladder on a server that is not monotone in the load)
    p95s = {0: 40, 1: 60, 2: 600, 3: 1050, 4: 390}
    records = [
        w
        for r in range(3)
        for phase, p95 in p95s.items()
        for w in level(r, phase, 500 * (phase + 1), p95, load=2.0**phase)
    ]
    h = headline(records, 3)
    assert h.within_threshold and h.level_load == 16 and h.breached_below == (4.0, 8.0)
    assert (
        "meets the limits at load 16 but not at load 4, 8 below it (at load 4: p95 600.0 ms above the 500 ms "
        "threshold): its figure holds at load 16, not at every lower load"
    ) in h.notes
    assert Headline.from_dict(h.to_dict()).breached_below == (4.0, 8.0)
    monotone = headline([w for r in range(3) for w in level(r, 0, 600, 40) + level(r, 1, 900, 700)], 3)
    assert monotone.breached_below == () and not any("below it" in note for note in monotone.notes)
    none_met = headline([w for r in range(3) for w in level(r, 0, 600, 700) + level(r, 1, 900, 900)], 3)
    assert none_met.breached_below == () and not none_met.within_threshold


def test_a_level_only_some_repeats_reached_does_not_meet():
    # repeats 1 and 2 stopped during level 1; repeat 0 went on to a fast level 2 that only it measured
    records = [w for r in range(3) for w in level(r, 0, 600, 20) + level(r, 1, 1000, 300)] + level(0, 2, 1500, 100)
    decision = decide(records, Measured(repeats=3), RULES)
    assert decision.levels[2].why_not == "reached by 1 of 3 repeats (the others stopped before it)"
    assert decision.levels[2].breached == 2 and decision.chosen.phase_index == 1


def test_no_meeting_level_shows_the_lowest_level_over_all_repeats():
    records = [w for r in range(3) for w in level(r, 0, 600, 700 if r else 400) + level(r, 1, 900, 900)]
    h = headline(records, 3)
    assert not h.within_threshold and h.max_invocations is None and h.model_latency_ms is None
    assert h.phase_index == 0 and h.invocations_per_minute == pytest.approx(600 * sum(NOISE) / 4)
    assert h.latency("p95") == pytest.approx(600) and h.repeats_breached == 2
    assert h.notes[0] == (
        "no load level meets p95 <= 500 ms and error rate <= 1.0%: at load 1 (the lowest) "
        "p95 600.0 ms above the 500 ms threshold"
    )
    assert "2 of 3 repeats breached at load 1 on their own" in h.notes


@pytest.mark.parametrize(
    ("rules", "phase", "why"),
    [
        (RULES, 1, None),
        (dataclasses.replace(RULES, threshold_ms=30), 0, None),
        (dataclasses.replace(RULES, threshold_ms=10), None, "p95 20.0 ms above the 10 ms threshold"),
        (
            dataclasses.replace(RULES, percentile="p99"),
            None,
            "too few samples for p99 in every window (needs 100 per window)",
        ),
        (dataclasses.replace(RULES, max_error_rate=0.001), 0, None),
    ],
)
def test_the_same_windows_decided_under_other_limits(rules, phase, why):
    records = level(0, 0, 600, 20) + level(0, 1, 1000, 40, errors=2)  # level 1: 1 % errors
    h = headline(records, 1, rules)
    assert (h.phase_index if h.within_threshold else None) == phase
    assert (h.percentile, h.threshold_ms, h.max_error_rate) == (
        rules.percentile,
        rules.threshold_ms,
        rules.max_error_rate,
    )
    if why:
        assert why in h.notes[0]


def test_levels_are_ordered_by_load_then_throughput():
    records = level(0, 0, 900, 20, load=4) + level(0, 1, 1000, 20, load=2)  # a later phase with less load
    assert headline(records, 1).phase_index == 0


def test_stability_is_judged_on_the_level_over_all_repeats():
    steady = headline([w for r in range(3) for w in level(r, 0, 1000, 40)], 3)
    assert steady.stable and steady.stability.windows == 12
    short = headline(level(0, 0, 1000, 40, windows=3), 1)
    assert not short.stable and "unstable at load 1: too few windows (3 < 4)" in short.notes


@pytest.mark.parametrize(
    ("rules", "noted"),
    [
        (dataclasses.replace(RULES, threshold_ms=800), True),  # looser than the stop: levels past it were not measured
        (dataclasses.replace(RULES, threshold_ms=300), False),  # stricter: what was measured answers it
        (dataclasses.replace(RULES, percentile="p90"), True),  # a lower percentile at the same threshold is looser
    ],
)
def test_a_run_stopped_on_latency_says_so_under_looser_limits(rules, noted):
    records = level(0, 0, 600, 20) + level(0, 1, 900, 600)
    h = headline(
        records,
        1,
        rules,
        stop_reasons=("latency: p95 above 500 ms in 4 consecutive windows",),
        stop_limits=Limits("p95", 500, 0.01),
    )
    assert any(n.startswith("measured up to the stop at p95 500 ms") for n in h.notes) is noted


def test_no_windows_is_said():
    h = headline([], 1)
    assert not h.within_threshold and h.notes == ("no steady-state window measured",)


def test_the_percentile_sample_count_counts_only_the_windows_the_percentile_used():
    """5 windows of 30 requests; one had too few samples for p95 (None): 120 requests used, not 150."""
    records = [window(0, 0, i, 300, 20, requests=30) for i in range(4)] + [window(0, 0, 4, 300, None, requests=30)]
    h = headline(records, 1)
    assert h.samples == 120


def test_repeats_in_lock_step_give_one_request_per_window_not_plus_minus_zero():
    """Three repeats of a closed loop that counted the same requests in every window: the interval is +- one
    request per window (its resolution), never +- 0; the latency's +- 1 us."""
    # 90 requests in a 2 s window = 2,700 invocations/min: one request more or less is 30/min
    records = [window(r, 0, i, 2700.0, 40.0, requests=90) for r in range(3) for i in range(4)]
    h = headline(records, 3)
    assert h.ipm_interval is not None and h.ipm_interval.n == 3
    assert (h.ipm_interval.low, h.ipm_interval.high) == pytest.approx((2670.0, 2730.0))
    assert h.latency_interval is not None
    assert (h.latency_interval.low, h.latency_interval.high) == pytest.approx((39.999, 40.001))
