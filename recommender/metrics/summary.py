"""Client-side metrics from the exact per-request log: per-second series and per-phase summaries.

A request counts in the second (or window) in which it COMPLETED (send time + latency).
Invocations per minute (IPM) = successful completions in the window / window seconds x 60.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from recommender.metrics.records import RequestLog
from recommender.vocabulary import PERCENTILES


def percentile_ms(latency_us: np.ndarray, name: str) -> float | None:
    """Nearest-rank percentile in ms, or None when there are too few samples to tell it apart from the maximum.

    A percentile q needs at least 1 / (1 - q) samples (p99: 100, p95: 20, p90: 10, p50: 2).
    """
    q = PERCENTILES[name]
    if len(latency_us) < min_samples(name):
        return None
    return float(np.percentile(latency_us, q, method="inverted_cdf")) / 1000.0


def min_samples(name: str) -> int:
    return math.ceil(round(1.0 / (1.0 - PERCENTILES[name] / 100.0), 6))


def completions_between(log: RequestLog, start: float, end: float) -> RequestLog:
    """Requests that completed (send time + latency) in [start, end)."""
    done = log.t_s + log.latency_us / 1e6
    return log.rows((done >= start) & (done < end))


@dataclass(frozen=True)
class WindowStats:
    """Throughput, errors and latency percentiles of the requests completed in one time window."""

    start_s: float
    end_s: float
    requests: int
    ok: int
    errors: int
    invocations_per_minute: float
    latency_ms: dict[str, float | None]
    users_min: int = 0
    users_max: int = 0

    @property
    def error_rate(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    @property
    def samples(self) -> int:
        return self.ok


def window_stats(log: RequestLog, start: float, end: float) -> WindowStats:
    """Statistics of [start, end); latency percentiles are over successful requests only."""
    part = completions_between(log, start, end)
    ok_latency = part.latency_us[part.ok]
    seconds = max(end - start, 1e-9)
    ok = int(part.ok.sum())
    users = part.users
    return WindowStats(
        start_s=start,
        end_s=end,
        requests=len(part.t_s),
        ok=ok,
        errors=int(len(part.t_s) - ok),
        invocations_per_minute=ok / seconds * 60.0,
        latency_ms={name: percentile_ms(ok_latency, name) for name in PERCENTILES},
        users_min=int(users.min()) if len(users) else 0,
        users_max=int(users.max()) if len(users) else 0,
    )


def per_second_series(log: RequestLog, duration_s: float) -> list[WindowStats]:
    """One WindowStats per whole second of the run."""
    return [window_stats(log, float(s), float(s + 1)) for s in range(math.ceil(duration_s))]


@dataclass(frozen=True)
class PhaseSummary:
    """One traffic phase measured over its steady part (the phase minus its warm-up)."""

    index: int
    stats: WindowStats
    phase_start_s: float
    phase_end_s: float
    stable: bool | None = None  # some `stability.windows` consecutive windows of the phase agree (None: not judged)
    flags: tuple[str, ...] = ()  # generator-bound, late sends


def summarize_phases(log: RequestLog, windows: list[tuple[float, float]], warmup_s: float) -> list[PhaseSummary]:
    """Per phase: the window from phase start + warm-up to phase end (warm-up capped at half the phase)."""
    summaries = []
    for index, (start, end) in enumerate(windows):
        measured_start = start + min(warmup_s, (end - start) / 2)
        summaries.append(PhaseSummary(index, window_stats(log, measured_start, end), start, end))
    return summaries
