"""Load levels, decided at decision time: verdicts, MaxInvocations, ModelLatency, their intervals and stability,
recomputed from the stored windows for any threshold, percentile and error limit (docs/design.md "Definitions").

    window records (every repeat) + Rules  ->  levels  ->  the highest meeting level  ->  the headline's figures

A *level* is one phase / step / concurrency / rate level (`phase_index`, offered `load`); its windows of every repeat
are pooled.
- It *meets* the limits when every repeat reached it, the mean of its windows' percentile latencies (windows with
  enough samples for the percentile) is <= the threshold and its pooled error rate (errors / requests) <= the limit.
  A level only some repeats reached has no all-repeat figure: the others stopped before it, which counts as a breach.
- Each repeat's own verdict at a level is kept as well (a repeat that never reached the level breached it), so the
  figures can say "2 of 3 repeats breached".
- MaxInvocations is the mean IPM over the windows of the highest meeting level (by load, then IPM); ModelLatency the
  mean of their percentile latencies; intervals follow the rule in metrics/intervals.py; stability the rule in
  metrics/stability.py. A candidate none of whose levels meets shows the figures of its lowest level instead.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from recommender.metrics.headline import Headline, Limits
from recommender.metrics.intervals import Interval, level_interval
from recommender.metrics.stability import Stability
from recommender.metrics.steady import Rules, Window, judge_windows
from recommender.metrics.summary import min_samples
from recommender.vocabulary import PERCENTILE_NAMES, PERCENTILES

SERVER_FIGURES = (
    "server_cpu_percent",
    "server_rss_mb",
    "gpu_utilization_percent",
    "gpu_memory_mb",
    "gpu_power_w",
    "queue_us",
    "compute_input_us",
    "compute_infer_us",
    "compute_output_us",
    "executions",
    "inferences",
    "avg_batch_size",
)


@dataclass(frozen=True)
class WindowRecord:
    """One stored steady-state window as the decision reads it (the store maps its rows to these; no ORM here)."""

    repeat: int
    phase_index: int
    index: int  # within its phase
    load: float
    requests: int
    errors: int
    samples: int  # successful requests
    ipm: float
    latency_ms: Mapping[str, float | None]
    server: Mapping[str, float | None] = field(default_factory=dict)

    def latency(self, percentile: str) -> float | None:
        return self.latency_ms.get(percentile)

    @classmethod
    def of(cls, repeat: int, window: Window) -> WindowRecord:
        s = window.stats
        return cls(
            repeat,
            window.phase_index,
            window.index,
            window.load,
            s.requests,
            s.errors,
            s.ok,
            s.invocations_per_minute,
            dict(s.latency_ms),
            {k: window.server.get(k) for k in SERVER_FIGURES},
        )


@dataclass(frozen=True)
class Level:
    """One load level over every repeat: its windows, its verdict and its repeats' verdicts, its stability."""

    phase_index: int
    load: float
    windows: tuple[WindowRecord, ...]
    repeats: int
    why_not: str  # "" when the level meets the limits
    breached: int  # repeats whose own windows here breach the limits (or that never reached the level)
    stability: Stability

    @property
    def meets(self) -> bool:
        return not self.why_not

    @property
    def ipm(self) -> float:
        return _mean([w.ipm for w in self.windows]) or 0.0

    def latency(self, percentile: str) -> float | None:
        return _mean([w.latency(percentile) for w in self.windows if w.latency(percentile) is not None])

    @property
    def error_rate(self) -> float:
        requests = sum(w.requests for w in self.windows)
        return sum(w.errors for w in self.windows) / requests if requests else 0.0

    @property
    def samples(self) -> int:
        return sum(w.samples for w in self.windows)

    def interval(self, value: Callable[[WindowRecord], float | None]) -> Interval | None:
        """The interval rule on one figure: over per-repeat level means, or over windows (noise only), or None."""
        known = [(w.repeat, v) for w in self.windows for v in [value(w)] if v is not None]
        per_repeat = [_mean([v for r, v in known if r == repeat]) for repeat in sorted({r for r, _ in known})]
        return level_interval(per_repeat, [v for _, v in known], self.repeats)

    def server(self) -> dict[str, float]:
        """Server-side figures at the level: each one's mean over the windows that have it."""
        means = {
            name: _mean([w.server.get(name) for w in self.windows if w.server.get(name) is not None])
            for name in SERVER_FIGURES
        }
        return {name: value for name, value in means.items() if value is not None}


@dataclass(frozen=True)
class Decision:
    """Every level of a run judged under one set of limits, and the level MaxInvocations comes from (if any)."""

    levels: tuple[Level, ...]
    chosen: Level | None

    @property
    def shown(self) -> Level | None:
        """The level whose figures the headline shows: the chosen one, else the lowest (an excluded candidate)."""
        return self.chosen or min(self.levels, key=lambda v: (v.load, v.phase_index), default=None)


def breach(windows: list[WindowRecord], rules: Rules) -> str:
    """Why these windows do not meet the limits, in words ('' when they do)."""
    p = rules.percentile
    if not windows:
        return "not reached"
    if sum(w.samples for w in windows) == 0:
        return "no successful request"
    latency = _mean([w.latency(p) for w in windows if w.latency(p) is not None])
    if latency is None:
        return f"too few samples for {p} in every window (needs {min_samples(p)} per window)"
    if latency > rules.threshold_ms:
        return f"{p} {latency:.1f} ms above the {rules.threshold_ms:g} ms threshold"
    requests = sum(w.requests for w in windows)
    errors = sum(w.errors for w in windows) / requests if requests else 0.0
    if errors > rules.max_error_rate:
        return f"error rate {errors:.1%} above the {rules.max_error_rate:.1%} limit"
    return ""


def judge_level(windows: list[WindowRecord], repeats: int, rules: Rules) -> Level:
    """One level's verdict over every repeat, each repeat's own verdict and the level's stability."""
    first = windows[0]
    reached = {w.repeat for w in windows}
    why_not = (
        f"reached by {len(reached)} of {repeats} repeats (the others stopped before it)"
        if len(reached) < repeats
        else breach(windows, rules)
    )
    breached = sum(bool(breach([w for w in windows if w.repeat == r], rules)) for r in range(repeats))
    return Level(
        first.phase_index, first.load, tuple(windows), repeats, why_not, breached, judge_windows(windows, rules)
    )


def decide_levels(records: list[WindowRecord], repeats: int, rules: Rules) -> Decision:
    """Judge every level of a run; the chosen one is the highest meeting level (by load, then mean IPM)."""
    phases = sorted({w.phase_index for w in records})
    levels = tuple(judge_level([w for w in records if w.phase_index == phase], repeats, rules) for phase in phases)
    chosen = max((v for v in levels if v.meets), key=lambda v: (v.load, v.ipm), default=None)
    return Decision(levels, chosen)


def decide_headline(measured: Headline, records: list[WindowRecord], rules: Rules) -> Headline:
    """The headline under `rules`: every decision figure recomputed from the windows, the measured facts kept."""
    decision = decide_levels(records, measured.repeats, rules)
    level, p = decision.shown, rules.percentile
    limits = {"percentile": p, "threshold_ms": rules.threshold_ms, "max_error_rate": rules.max_error_rate}
    if level is None:
        return dataclasses.replace(
            measured,
            **limits,
            within_threshold=False,
            max_invocations=None,
            model_latency_ms=None,
            stable=None,
            stability=None,
            ipm_interval=None,
            latency_interval=None,
            notes=("no steady-state window measured",),
        )
    within = decision.chosen is not None
    return dataclasses.replace(
        measured,
        **limits,
        **_figures(level, p, within),
        within_threshold=within,
        repeats_breached=level.breached,
        windows=dataclasses.replace(measured.windows, at_level=len(level.windows)),
        notes=tuple(_notes(decision, level, measured, rules)),
    )


def _figures(level: Level, p: str, within: bool) -> dict[str, Any]:
    return {
        "phase_index": level.phase_index,
        "level_load": level.load,
        "invocations_per_minute": level.ipm,
        "max_invocations": level.ipm if within else None,
        "latency_ms": {name: level.latency(name) for name in PERCENTILE_NAMES},
        "model_latency_ms": level.latency(p) if within else None,
        "error_rate": level.error_rate,
        "ipm_interval": level.interval(lambda w: w.ipm),
        "latency_interval": level.interval(lambda w: w.latency(p)),
        "stable": level.stability.stable,
        "stability": level.stability,
        "samples": level.samples,
    }


def _notes(decision: Decision, level: Level, measured: Headline, rules: Rules) -> list[str]:
    notes = []
    at = f"at load {level.load:g}"
    if decision.chosen is None:
        notes.append(
            f"no load level meets {rules.percentile} <= {rules.threshold_ms:g} ms and error rate <= "
            f"{rules.max_error_rate:.1%}: {at} (the lowest) {level.why_not}"
        )
    if level.breached:
        notes.append(f"{level.breached} of {level.repeats} repeats breached {at} on their own")
    if not level.stability.stable:
        notes.append(f"unstable {at}: {level.stability.reason}")
    note = stop_note(measured, rules)
    return notes + ([note] if note else [])


def stop_note(measured: Headline, rules: Rules) -> str | None:
    """A run stopped by the latency or error stop condition measured nothing past the stop: say so when the limits
    now decided on are looser than those it stopped at (stricter ones are fully answered by what was measured)."""
    stop, reasons = measured.stop_limits, [r for r in measured.stop_reasons or (measured.stop_reason,) if r]
    if stop is None:
        return None
    looser_latency = (
        PERCENTILES[rules.percentile] < PERCENTILES[stop.percentile] or rules.threshold_ms > stop.threshold_ms
    )
    latency_stop = any(r.startswith("latency") for r in reasons) and looser_latency
    error_stop = any(r.startswith("error rate") for r in reasons) and rules.max_error_rate > stop.max_error_rate
    if not (latency_stop or error_stop):
        return None
    return (
        f"measured up to the stop at {stop.percentile} {stop.threshold_ms:g} ms / error rate {stop.max_error_rate:.1%} "
        f"(the limits it was measured with): load levels past the stop were not measured; "
        f"`recommender run FILE --fresh` to measure further"
    )


def limits_of(rules: Rules) -> Limits:
    return Limits(rules.percentile, rules.threshold_ms, rules.max_error_rate)


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
