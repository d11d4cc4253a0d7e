"""The load generator checks itself: flags for a level whose figures the generator, not the server, may have shaped.

Pure functions over what a run recorded (windows, the per-second timeline, lost workers); no I/O. A level is flagged
(the flags join metrics/steady.phase_flags' in the phase, the run's headline, the run table, the report and the
dashboard) when, during it:

- a generator process saturated its core: the busiest generator process averaged >= SATURATED_CPU % of one core
  over a steady-state window (Timeline.busiest_cpu; late sends are flagged by steady.phase_flags already);
- a worker dropped: Locust's distributed mode lost a worker between the level's start and end (its last second of
  rows and the load it carried until Locust handed its users to the others are missing);
- the server slowed: Triton's compute time per inference in a later window exceeded the mean of the level's first
  BASELINE_WINDOWS windows by more than SERVER_SLOWDOWN (a share), i.e. the server had less CPU while the generator
  ran (other tenants, or the generator itself on a shared host);
- a generative run's reader fell behind the streams (`stream_lagged`), while the busiest generator process averaged
  at least STREAM_BUSY_CPU % of a core over the level (below that it has room, whatever a token costs it): the
  generator's CPU per 1,000 output tokens/s above CORES_PER_KTOKENS (issue 39's bound), or more than BUNCHED_SHARE
  of the gaps between a request's chunks under BUNCHED_US (chunks read back to back from the socket's buffer: their
  times are the reader's, not their arrivals').
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from recommender.metrics.records import RequestLog, Timeline
from recommender.metrics.steady import Window

SATURATED_CPU = 90.0  # % of one core
SERVER_SLOWDOWN = 0.15  # compute per inference up by more than 15 % against the level's first windows
BASELINE_WINDOWS = 2
CORES_PER_KTOKENS = (
    0.1  # the generator's bound: at most 0.1 core per 1,000 output tokens/s (benchmarks/generator_stream)
)
STREAM_BUSY_CPU = 50.0  # % of one core: a generator below it keeps up whatever a token costs it
BUNCHED_US = 100  # two chunks of one request read closer than this came out of the buffer together
BUNCHED_SHARE = 0.1


def level_flags(
    windows: Sequence[Window],
    span: tuple[float, float],
    timeline: Timeline | None,
    lost_workers: Sequence[dict[str, Any]],
    requests: RequestLog | None = None,
) -> list[str]:
    """All self-check flags of one level (its windows in one repeat, its [start, end) on the load clock)."""
    flags = (
        saturated(windows, timeline),
        dropped(span, lost_workers),
        server_slowed(windows),
        stream_lagged(requests, span, timeline),
    )
    return [flag for flag in flags if flag]


def stream_lagged(requests: RequestLog | None, span: tuple[float, float], timeline: Timeline | None) -> str | None:
    """A generative level whose busy reader spent more than CORES_PER_KTOKENS per 1,000 output tokens/s, or read its
    chunks back to back; None for a run that is not generative or a generator with room."""
    if requests is None or not requests.generative or timeline is None:
        return None
    start, end = span
    inside = (timeline.t_s >= start) & (timeline.t_s < end)
    if not inside.any() or end <= start:
        return None
    busiest = float(timeline.busiest_cpu[inside].mean())
    if busiest < STREAM_BUSY_CPU:
        return None
    rows = requests.rows((requests.t_s >= start) & (requests.t_s < end))
    assert rows.output_tokens is not None  # a generative log has every generation column
    tokens_per_s = float(rows.output_tokens.clip(min=0).sum()) / (end - start)
    cores = float(timeline.cpu_percent[inside].mean()) / 100
    per_k = cores / (tokens_per_s / 1000) if tokens_per_s else math.inf
    gaps = np.concatenate([np.diff(rows.chunk_times_us(i)) for i in range(len(rows))] or [np.empty(0)])
    bunched = float(np.mean(gaps < BUNCHED_US)) if len(gaps) else 0.0
    said = []
    if per_k > CORES_PER_KTOKENS:
        said.append(f"{per_k:.2f} core per 1,000 output tokens/s > {CORES_PER_KTOKENS:g}")
    if bunched > BUNCHED_SHARE:
        said.append(f"{bunched:.0%} of chunk gaps under {BUNCHED_US} us: token times may be the reader's")
    if not said:
        return None
    return f"generator behind the streams ({'; '.join(said)}; a generator process at {busiest:.0f} % of a core)"


def saturated(windows: Sequence[Window], timeline: Timeline | None) -> str | None:
    """The busiest generator process's highest window mean, flagged at SATURATED_CPU % of a core or more."""
    if timeline is None or not len(timeline.t_s):
        return None
    means = [_mean_between(timeline.t_s, timeline.busiest_cpu, w.stats.start_s, w.stats.end_s) for w in windows]
    peak = max((m for m in means if m is not None), default=None)
    if peak is None or peak < SATURATED_CPU:
        return None
    return f"generator saturated (a generator process at {peak:.0f} % of a core >= {SATURATED_CPU:.0f} %)"


def dropped(span: tuple[float, float], lost_workers: Sequence[dict[str, Any]]) -> str | None:
    start, end = span
    during = [entry for entry in lost_workers if start <= entry["t_s"] < end]
    if not during:
        return None
    first = during[0]
    return f"worker dropped at {first['t_s']:.1f} s ({first['reason']})" + (
        f" and {len(during) - 1} more" if len(during) > 1 else ""
    )


def server_slowed(windows: Sequence[Window]) -> str | None:
    """Compute per inference of the later windows against the mean of the first BASELINE_WINDOWS."""
    compute = [w.server.get("compute_infer_us") for w in sorted(windows, key=lambda w: w.index)]
    if len(compute) <= BASELINE_WINDOWS or any(c is None for c in compute[:BASELINE_WINDOWS]):
        return None
    baseline = float(np.mean([c for c in compute[:BASELINE_WINDOWS] if c is not None]))  # none is None here
    later = [c for c in compute[BASELINE_WINDOWS:] if c is not None]
    if baseline <= 0 or not later or max(later) <= baseline * (1 + SERVER_SLOWDOWN):
        return None
    rise = max(later) / baseline - 1
    return (
        f"server slowed (compute per inference +{rise:.0%} > {SERVER_SLOWDOWN:.0%} against the level's first "
        f"{BASELINE_WINDOWS} windows)"
    )


def _mean_between(t_s: np.ndarray, values: np.ndarray, start: float, end: float) -> float | None:
    inside = (t_s >= start) & (t_s < end)
    return float(values[inside].mean()) if inside.any() else None
