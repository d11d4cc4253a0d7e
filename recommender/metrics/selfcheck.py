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
  ran (other tenants, or the generator itself on a shared host).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from recommender.metrics.records import Timeline
from recommender.metrics.steady import Window

SATURATED_CPU = 90.0  # % of one core
SERVER_SLOWDOWN = 0.15  # compute per inference up by more than 15 % against the level's first windows
BASELINE_WINDOWS = 2


def level_flags(
    windows: Sequence[Window],
    span: tuple[float, float],
    timeline: Timeline | None,
    lost_workers: Sequence[dict[str, Any]],
) -> list[str]:
    """All self-check flags of one level (its windows in one repeat, its [start, end) on the load clock)."""
    return [
        flag for flag in (saturated(windows, timeline), dropped(span, lost_workers), server_slowed(windows)) if flag
    ]


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
