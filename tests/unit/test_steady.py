"""Steady-state windows and their stability flags on synthetic series with hand-computed answers."""

import numpy as np
import pytest

from recommender.metrics.limits import Limits
from recommender.metrics.records import RequestLog
from recommender.metrics.rules import Rules, WindowRules
from recommender.metrics.steady import Window, mark_stable, measure_windows, phase_flags, window_spans
from recommender.metrics.summary import WindowStats

RULES = Rules(Limits("p95", 500, 0.01), WindowRules(warmup_s=5, window_s=5))


def win(
    phase: int, index: int, ipm: float, p95: float | None, load: float = 1, requests: int = 100, errors: int = 0
) -> Window:
    stats = WindowStats(
        0.0, 5.0, requests, requests - errors, errors, ipm, {"p50": p95, "p90": p95, "p95": p95, "p99": None}
    )
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
    assert window_spans([(0, 20), (20, 32)], warmup_s=5, window_s=5) == [
        (0, 5, 10),
        (0, 10, 15),
        (0, 15, 20),
        (1, 25, 30),
    ]


def test_a_phase_too_short_for_a_window_gets_one_shorter_window():
    # 4 s phase, warm-up 1 s: 3 s left, less than a 5 s window
    assert window_spans([(0, 4)], warmup_s=1, window_s=5) == [(0, 1, 4)]


def test_warmup_is_capped_at_half_the_phase():
    assert window_spans([(0, 10)], warmup_s=8, window_s=5) == [(0, 5, 10)]


def test_a_phase_with_four_steady_windows_is_stable():
    windows = mark_stable([win(0, i, ipm, 50) for i, ipm in enumerate([1000, 1010, 990, 1005])], RULES.windows, "p95")
    assert all(w.stable for w in windows)


def test_a_phase_with_too_few_windows_is_not_stable():
    windows = mark_stable(
        [win(0, 0, 1000, 50), win(0, 1, 1000, 50), win(0, 2, 1000, 50), win(1, 0, 1000, 50)], RULES.windows, "p95"
    )
    assert [w.stable for w in windows] == [False, False, False, False]  # 3 and 1 windows, 4 needed


def test_a_rising_latency_makes_its_phase_unstable():
    windows = mark_stable(
        [win(0, i, 1000, 50 + 2 * i) for i in range(4)], RULES.windows, "p95"
    )  # a perfect line: a trend
    assert not any(w.stable for w in windows)


def test_measured_windows_from_a_request_log():
    # 0-25 s at 10 requests/s and 20 ms: warm-up 5 s, then four windows of 50 requests = 600 IPM each
    log = steady_log([(0, 25, 10, 20)])
    windows = measure_windows(log, window_spans([(0, 25)], 5, 5), [2], RULES)
    assert [w.stats.ok for w in windows] == [50, 50, 50, 50]
    assert [round(w.ipm) for w in windows] == [600, 600, 600, 600]
    assert [w.latency("p95") for w in windows] == [20.0, 20.0, 20.0, 20.0]
    assert all(w.stable for w in windows) and windows[0].load == 2


def test_generator_bound_and_late_sends_are_flagged():
    w = Window(0, 0, win(0, 0, 600, 20).stats, 1, generator_cpu=85.0, late_share=0.03)
    assert phase_flags([w], RULES.windows) == [
        "generator-bound (load generator CPU 85 % > 70 %)",
        "late sends 3.0% > 1% (schedule not kept)",
    ]


def test_late_share_counts_sends_more_than_late_ms_after_schedule():
    log = steady_log([(0, 10, 10, 20)])
    late = np.zeros(len(log.t_s), dtype=np.int64)
    late[10:13] = [500, 1500, 2000]  # 0.5 ms is on time; 1.5 and 2 ms are late
    log = RequestLog(log.t_s, log.latency_us, log.ok, log.users, late)
    (window,) = measure_windows(log, [(0, 0.0, 5.0)], [10], RULES)
    assert window.late_share == pytest.approx(2 / 50)
