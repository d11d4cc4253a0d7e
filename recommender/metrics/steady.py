"""Steady-state windows and their stability flags (docs/design.md "Definitions").

Per phase the first `warmup_s` (capped at half the phase) is dropped; the rest is cut into fixed windows of
`window_s` (a trailing part shorter than a window is dropped; a phase too short for one window gets one shorter
window). A window is flagged stable when its phase, in its repeat, passes the stability rule (metrics/stability.py).
MaxInvocations and ModelLatency are decided per load level over all repeats in metrics/levels.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from recommender.metrics.generation import WindowGeneration, window_generation
from recommender.metrics.records import RequestLog, Timeline
from recommender.metrics.rules import Rules, WindowRules
from recommender.metrics.stability import Stability, judge
from recommender.metrics.summary import WindowStats, completions_between, window_stats

_EPSILON = 1e-9
GENERATOR_BOUND_CPU = 70.0  # % of one core: above it the generator's own latency inflates the measurements


@dataclass(frozen=True)
class Window:
    """One steady-state window of one phase: client statistics plus what was offered and how the generator fared."""

    phase_index: int
    index: int  # within its phase
    stats: WindowStats
    load: float  # offered: users (closed loop) or requests per second (open loop)
    stable: bool = False  # its phase, in this repeat, passes the stability rule
    late_share: float | None = None  # open loop: share of sends later than late_ms after their schedule
    generator_cpu: float | None = None  # mean CPU % of the load generator during the window
    server: dict[str, Any] = field(default_factory=dict)  # server-side figures (metrics.host.ServerSampler)
    generation: WindowGeneration | None = None  # a generative log's figures (metrics/generation.py)

    def latency(self, percentile: str) -> float | None:
        return self.stats.latency_ms[percentile]

    @property
    def ipm(self) -> float:
        return self.stats.invocations_per_minute


def window_spans(
    phase_windows: list[tuple[float, float]], warmup_s: float, window_s: float
) -> list[tuple[int, float, float]]:
    """(phase index, start, end) of every steady-state window, in time order."""
    spans = []
    for index, (start, end) in enumerate(phase_windows):
        first = start + min(warmup_s, (end - start) / 2)
        count = math.floor((end - first) / window_s + _EPSILON)
        if count == 0:
            spans.append((index, first, end))
        spans.extend((index, first + k * window_s, first + (k + 1) * window_s) for k in range(count))
    return spans


def measure_windows(
    log: RequestLog,
    spans: list[tuple[int, float, float]],
    loads: list[float],
    rules: Rules,
    timeline: Timeline | None = None,
) -> list[Window]:
    """Window statistics for every span, with stability flags, late-send shares, generator CPU and, for a generative
    log, the generation figures."""
    windows: list[Window] = []
    counters: dict[int, int] = {}
    for phase, start, end in spans:
        index = counters[phase] = counters.get(phase, -1) + 1
        windows.append(
            Window(
                phase,
                index,
                window_stats(log, start, end),
                loads[phase],
                late_share=_late_share(log, start, end, rules.windows.late_ms),
                generator_cpu=_mean_cpu(timeline, start, end),
                generation=window_generation(log, start, end),
            )
        )
    return mark_stable(windows, rules.windows, rules.limits.percentile)


def _late_share(log: RequestLog, start: float, end: float, late_ms: float) -> float | None:
    if log.late_us is None:
        return None
    done = log.t_s + log.latency_us / 1e6
    keep = (done >= start) & (done < end)
    count = int(keep.sum())
    return float(np.count_nonzero(log.late_us[keep] > late_ms * 1000)) / count if count else 0.0


def _mean_cpu(timeline: Timeline | None, start: float, end: float) -> float | None:
    if timeline is None:
        return None
    inside = (timeline.t_s >= start) & (timeline.t_s < end)
    return float(timeline.busiest_cpu[inside].mean()) if inside.any() else None


def mark_stable(windows: list[Window], rules: WindowRules, percentile: str) -> list[Window]:
    """Flag every window whose phase (the windows given: one repeat) passes the stability rule at `percentile`."""
    verdicts = {
        phase: judge_windows([w for w in windows if w.phase_index == phase], rules, percentile).stable
        for phase in {w.phase_index for w in windows}
    }
    return [replace(w, stable=verdicts[w.phase_index]) for w in windows]


def judge_windows(windows: list, rules: WindowRules, p: str) -> Stability:
    """The stability rule at percentile `p` on one level's windows (anything with index, ipm and latency(p))."""
    ipm = [(float(w.index), w.ipm) for w in windows]
    latency = [(float(w.index), w.latency(p)) for w in windows if w.latency(p) is not None]
    return judge(ipm, latency, len(windows), rules.stable_windows, rules.stability_tolerance, p)


def phase_flags(windows: list[Window], rules: WindowRules) -> list[str]:
    """Warnings about a set of windows: generator-bound, late sends."""
    flags = []
    cpu = [w.generator_cpu for w in windows if w.generator_cpu is not None]
    if cpu and max(cpu) > GENERATOR_BOUND_CPU:
        flags.append(f"generator-bound (load generator CPU {max(cpu):.0f} % > {GENERATOR_BOUND_CPU:.0f} %)")
    late = [w.late_share for w in windows if w.late_share is not None]
    if late and max(late) > rules.max_late_share:
        flags.append(f"late sends {max(late):.1%} > {rules.max_late_share:.0%} (schedule not kept)")
    return flags


__all__ = [
    "GENERATOR_BOUND_CPU",
    "Rules",
    "Window",
    "WindowRules",
    "completions_between",
    "judge_windows",
    "mark_stable",
    "measure_windows",
    "phase_flags",
    "window_spans",
]
