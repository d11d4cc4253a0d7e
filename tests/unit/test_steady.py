"""Steady-state windows, stability and MaxInvocations on synthetic series with hand-computed answers."""

import numpy as np
import pytest

from recommender.records import RequestLog
from recommender.metrics.steady import Rules, Window, agree, mark_stable, max_invocations, measure_windows, window_spans
from recommender.metrics.summary import WindowStats

RULES = Rules(percentile="p95", threshold_ms=500, max_error_rate=0.01, warmup_s=5, window_s=5)


def win(phase: int, index: int, ipm: float, p95: float | None, load: float = 1, requests: int = 100, errors: int = 0) -> Window:
    stats = WindowStats(0.0, 5.0, requests, requests - errors, errors, ipm, {"p50": p95, "p90": p95, "p95": p95, "p99": None})
    return Window(phase, index, stats, load)


def steady_log(segments: list[tuple[float, float, float, float]]) -> RequestLog:
    """(start, end, requests per second, latency ms) segments; each request is sent `latency` before it completes."""
    t, latency = [], []
    for start, end, rate, ms in segments:
        done = np.arange(start, end, 1 / rate) + 1e-6
        t.append(done - ms / 1000)
        latency.append(np.full(len(done), ms * 1000, dtype=np.int64))
    t_s, lat = np.concatenate(t), np.concatenate(latency)
    return RequestLog(t_s, lat, np.ones(len(t_s), bool), np.ones(len(t_s), np.int32))


def test_windows_drop_the_warmup_and_the_trailing_part():
    # phase 0 [0, 20): warm-up 5 s, three 5 s windows; phase 1 [20, 32): starts at 25, one window, 2 s dropped
    assert window_spans([(0, 20), (20, 32)], warmup_s=5, window_s=5) == [(0, 5, 10), (0, 10, 15), (0, 15, 20), (1, 25, 30)]


def test_a_phase_too_short_for_a_window_gets_one_shorter_window():
    # 4 s phase, warm-up 1 s: 3 s left, less than a 5 s window
    assert window_spans([(0, 4)], warmup_s=1, window_s=5) == [(0, 1, 4)]


def test_warmup_is_capped_at_half_the_phase():
    assert window_spans([(0, 10)], warmup_s=8, window_s=5) == [(0, 5, 10)]


@pytest.mark.parametrize(("values", "expected"), [
    ([100, 105, 95], True),  # mean 100, every value within +-10
    ([100, 100, 125], False),  # mean 108.3: 125 is 16.7 away, more than 10.8
    ([100, 110, 90], True),  # exactly on the edge counts as agreeing
    ([100, None, 100], False),  # a percentile without enough samples never agrees
    ([0, 0, 0], False),
])
def test_agreement_within_tolerance(values, expected):
    assert agree(values, 0.10) is expected


def test_three_agreeing_windows_make_a_stable_run():
    windows = mark_stable([win(0, 0, 1000, 50), win(0, 1, 1300, 50), win(0, 2, 1250, 52), win(0, 3, 1200, 51)], RULES)
    # 1000/1300/1250 disagree (mean 1183, 1000 is 183 away > 118); 1300/1250/1200 agree (mean 1250, +-50)
    assert [w.stable for w in windows] == [False, True, True, True]


def test_a_run_never_spans_two_phases():
    windows = mark_stable([win(0, 0, 1000, 50), win(0, 1, 1000, 50), win(1, 0, 1000, 50)], RULES)
    assert [w.stable for w in windows] == [False, False, False]


def test_latency_disagreement_makes_a_run_unstable():
    windows = mark_stable([win(0, 0, 1000, 50), win(0, 1, 1000, 70), win(0, 2, 1000, 50)], RULES)
    assert not any(w.stable for w in windows)  # mean 56.7 ms, 70 is 13.3 away > 5.7


def test_measured_windows_from_a_request_log():
    # 0-20 s at 10 requests/s and 20 ms: warm-up 5 s, then three windows of 50 requests = 600 IPM each
    log = steady_log([(0, 20, 10, 20)])
    windows = measure_windows(log, window_spans([(0, 20)], 5, 5), [2], RULES)
    assert [w.stats.ok for w in windows] == [50, 50, 50]
    assert [round(w.ipm) for w in windows] == [600, 600, 600]
    assert [w.latency("p95") for w in windows] == [20.0, 20.0, 20.0]
    assert all(w.stable for w in windows) and windows[0].load == 2


def test_max_invocations_is_the_best_passing_window():
    # phase 0 (2 users): 600 IPM at 20 ms; phase 1 (4 users): 1200 IPM at 900 ms, over the 500 ms threshold
    log = steady_log([(0, 20, 10, 20), (20, 40, 20, 900)])
    windows = measure_windows(log, window_spans([(0, 20), (20, 40)], 5, 5), [2, 4], RULES)
    best = max_invocations(windows, RULES)
    assert best.within_threshold and best.stable
    assert best.max_invocations == pytest.approx(600.0)
    assert best.model_latency_ms == 20.0
    assert best.window.phase_index == 0


def test_stable_windows_are_preferred_over_a_faster_unstable_one():
    windows = mark_stable([win(0, 0, 600, 20), win(0, 1, 610, 20), win(0, 2, 590, 20), win(1, 0, 700, 30)], RULES)
    best = max_invocations(windows, RULES)
    assert (best.max_invocations, best.stable) == (610, True)


def test_an_unstable_best_is_reported_as_unstable():
    best = max_invocations([win(0, 0, 600, 20), win(0, 1, 900, 20), win(0, 2, 300, 20)], RULES)
    assert (best.max_invocations, best.stable) == (900, False)
    assert "unstable: no passing window belongs to a stable run" in best.notes


@pytest.mark.parametrize(("windows", "note"), [
    ([win(0, 0, 600, 900)], "p95 900.0 ms above the 500 ms threshold in every window"),
    ([win(0, 0, 600, None, requests=10)], "too few samples (10) for p95 (needs 20) in every window"),
    ([win(0, 0, 600, 20, requests=100, errors=5)], "error rate 5.0% above the 1.0% limit in every window"),
])
def test_no_passing_window_says_why(windows, note):
    best = max_invocations(windows, RULES)
    assert not best.within_threshold and best.notes[0] == note


def test_generator_bound_and_late_sends_are_flagged():
    w = Window(0, 0, win(0, 0, 600, 20).stats, 1, generator_cpu=85.0, late_share=0.03)
    best = max_invocations([w], RULES)
    assert "generator-bound (load generator CPU 85 % > 70 %)" in best.notes
    assert "late sends 3.0% > 1% (schedule not kept)" in best.notes


def test_late_share_counts_sends_more_than_late_ms_after_schedule():
    log = steady_log([(0, 10, 10, 20)])
    late = np.zeros(len(log.t_s), dtype=np.int64)
    late[10:13] = [500, 1500, 2000]  # 0.5 ms is on time; 1.5 and 2 ms are late
    log = RequestLog(log.t_s, log.latency_us, log.ok, log.users, late)
    (window,) = measure_windows(log, [(0, 0.0, 5.0)], [10], RULES)
    assert window.late_share == pytest.approx(2 / 50)
