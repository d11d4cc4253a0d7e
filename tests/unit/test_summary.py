"""Summary math on request logs with known answers."""

import numpy as np
import pytest

from recommender.metrics.records import RequestLog
from recommender.metrics.summary import (
    min_samples,
    per_second_series,
    percentile_ms,
    summarize_phases,
    window_stats,
)


def log(t_s, latency_ms, ok=None, users=None) -> RequestLog:
    n = len(t_s)
    return RequestLog(
        np.asarray(t_s, dtype=float),
        (np.asarray(latency_ms, dtype=float) * 1000).astype(np.int64),
        np.asarray(ok if ok is not None else [True] * n, dtype=bool),
        np.asarray(users if users is not None else [1] * n, dtype=np.int32),
    )


@pytest.mark.parametrize(("name", "needed"), [("p50", 2), ("p90", 10), ("p95", 20), ("p99", 100)])
def test_minimum_samples_per_percentile(name, needed):
    assert min_samples(name) == needed
    assert percentile_ms(np.arange(needed - 1) * 1000, name) is None
    assert percentile_ms(np.arange(needed) * 1000, name) is not None


def test_nearest_rank_percentiles_of_1_to_100_ms():
    latency_us = np.arange(1, 101) * 1000
    assert [percentile_ms(latency_us, p) for p in ("p50", "p90", "p95", "p99")] == [50.0, 90.0, 95.0, 99.0]


def test_window_counts_requests_by_completion_time():
    # sent at 0.5 s taking 600 ms completes at 1.1 s: it belongs to second 1, not second 0
    requests = log([0.1, 0.5, 1.2, 1.3], [100, 600, 100, 100], ok=[True, True, True, False])
    first, second = per_second_series(requests, 2.0)
    assert (first.requests, first.ok) == (1, 1)
    assert (second.requests, second.ok, second.errors) == (3, 2, 1)
    assert second.invocations_per_minute == 120.0
    assert second.error_rate == pytest.approx(1 / 3)


def test_ipm_over_a_ten_second_window():
    # 50 requests per second for 10 s -> 3000 invocations per minute
    t = np.arange(0, 10, 0.02)
    stats = window_stats(log(t, np.full(len(t), 1.0)), 0.0, 10.0)
    assert stats.ok == 500
    assert stats.invocations_per_minute == pytest.approx(3000.0)


def test_warmup_is_excluded_from_each_phase():
    # phase 0: [0, 10) at 10/s; phase 1: [10, 20) at 20/s; warm-up 2 s
    t = np.concatenate([np.arange(0, 10, 0.1), np.arange(10, 20, 0.05)])
    phases = summarize_phases(log(t, np.full(len(t), 1.0)), [(0, 10), (10, 20)], warmup_s=2)
    assert [p.stats.start_s for p in phases] == [2, 12]
    assert [round(p.stats.invocations_per_minute) for p in phases] == [600, 1200]
