"""Load levels, decided at decision time: verdicts, MaxInvocations, ModelLatency, their intervals and stability,
recomputed from the stored windows for any threshold, percentile and error limit (docs/design.md "Definitions").

    window records (every repeat) + Measured + Limits (+ WindowRules)  ->  decide  ->  Decision: levels, the
    highest meeting level, the headline's figures and the server figures at the level shown (computed once)

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

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from recommender.metrics.generation import WindowGeneration, level_generation, term_value
from recommender.metrics.headline import Figures, Headline, Measured
from recommender.metrics.intervals import Interval, level_interval
from recommender.metrics.limits import Limits, SloTerm
from recommender.metrics.rules import WindowRules
from recommender.metrics.server_figures import SERVER_FIGURES
from recommender.metrics.stability import Stability
from recommender.metrics.steady import Window, judge_windows
from recommender.metrics.stop_reason import StopKind, StopReason
from recommender.metrics.summary import min_samples
from recommender.vocabulary import PERCENTILE_NAMES, PERCENTILES

LATENCY_RESOLUTION_MS = 0.001  # latencies are recorded in whole microseconds


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
    generation: WindowGeneration | None = None  # a generative window's figures (metrics/generation.py)

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
            window.generation,
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

    def samples(self, percentile: str) -> int:
        """Successful requests the level's `percentile` rests on: those of the windows that have one (a window with
        too few samples for the percentile is left out of it, and so are its requests)."""
        return sum(w.samples for w in self.windows if w.latency(percentile) is not None)

    def interval(
        self, value: Callable[[WindowRecord], float | None], resolution: float = 0.0, measured: Measured = Measured()
    ) -> Interval | None:
        """The interval rule on one figure: over per-repeat level means, or over windows (noise only, each repeat's in
        order: their autocorrelation counts), or None; never narrower than +- `resolution`; corrected for the looks
        the measurement's stopping rules had."""
        ordered = sorted(self.windows, key=lambda w: (w.repeat, w.index))
        known = [(w.repeat, v) for w in ordered for v in [value(w)] if v is not None]
        repeats = sorted({r for r, _ in known})
        runs = [[v for r, v in known if r == repeat] for repeat in repeats]
        per_repeat = [sum(mine) / len(mine) for mine in runs]
        return level_interval(per_repeat, runs, self.repeats, resolution, measured.window_looks, measured.repeat_looks)

    @property
    def ipm_resolution(self) -> float:
        """One request in one window, in invocations per minute (the longest window's: the finest step)."""
        return min((w.ipm / w.samples for w in self.windows if w.samples), default=0.0)

    def server(self) -> dict[str, float]:
        """Server-side figures at the level: each one's mean over the windows that have it."""
        means = {
            name: _mean([w.server.get(name) for w in self.windows if w.server.get(name) is not None])
            for name in SERVER_FIGURES
        }
        return {name: value for name, value in means.items() if value is not None}


@dataclass(frozen=True)
class Decision:
    """A run decided under one set of limits, computed once by `decide`: every level judged, the level MaxInvocations
    comes from (if any), the headline figures and the server figures at the level shown."""

    levels: tuple[Level, ...]
    chosen: Level | None
    measured: Measured
    figures: Figures
    server: Mapping[str, float]  # server-side figures at the shown level (`server_stats["at_max_invocations"]`)

    @property
    def shown(self) -> Level | None:
        """The level whose figures the headline shows: the chosen one, else the lowest (an excluded candidate)."""
        return self.chosen or lowest(self.levels)

    @property
    def headline(self) -> Headline:
        shown = self.shown
        return Headline.join(self.measured, self.figures, len(shown.windows) if shown else 0)

    def server_stats(self, run_wide: Mapping[str, Any] | None) -> dict[str, Any]:
        """The run's stored server statistics with the figures at the shown level in place (`at_max_invocations`)."""
        return dict(run_wide or {}) | {"at_max_invocations": dict(self.server)}


def decide(
    records: list[WindowRecord], measured: Measured, limits: Limits, rules: WindowRules = WindowRules()
) -> Decision:
    """The run's windows (every repeat) decided under `limits`: levels, the chosen one, the figures at the shown one."""
    levels = judge_levels(records, measured.repeats, limits, rules)
    chosen = max((v for v in levels if v.meets), key=lambda v: (v.load, v.ipm), default=None)
    shown = chosen or lowest(levels)
    if shown is None:
        figures = Figures.under(limits, notes=("no steady-state window measured",))
        return Decision(levels, None, measured, figures, {})
    below = breached_below(levels, chosen)
    notes = tuple(_notes(chosen, shown, measured, limits, below))
    figures = _figures(shown, limits, chosen is not None, notes, measured, tuple(v.load for v in below))
    return Decision(levels, chosen, measured, figures, shown.server())


def breach(windows: list[WindowRecord], limits: Limits) -> str:
    """Why these windows do not meet the limits, in words ('' when they do)."""
    if not windows:
        return "not reached"
    if sum(w.samples for w in windows) == 0:
        return "no successful request"
    for index, term in enumerate(limits.terms):
        why = _term_breach(windows, term, first=index == 0)
        if why:
            return why
    requests = sum(w.requests for w in windows)
    errors = sum(w.errors for w in windows) / requests if requests else 0.0
    if errors > limits.max_error_rate:
        return f"error rate {errors:.1%} above the {limits.max_error_rate:.1%} limit"
    return ""


def _term_breach(windows: list[WindowRecord], term: SloTerm, first: bool) -> str:
    """Why the windows breach one term ('' when within): the mean of their percentiles against its threshold (the
    first term, the latency threshold, in today's words)."""
    p = term.percentile
    figure = _mean([term_value(w, term) for w in windows])
    name = p if first else term.label
    if figure is None:
        return f"too few samples for {name} in every window (needs {min_samples(p)} per window)"
    if figure > term.threshold_ms:
        what = "threshold" if first else "SLO"
        return f"{name} {figure:.1f} ms above the {term.threshold_ms:g} ms {what}"
    return ""


def judge_level(windows: list[WindowRecord], repeats: int, limits: Limits, rules: WindowRules) -> Level:
    """One level's verdict over every repeat, each repeat's own verdict and the level's stability."""
    first = windows[0]
    reached = {w.repeat for w in windows}
    why_not = (
        f"reached by {len(reached)} of {repeats} repeats (the others stopped before it)"
        if len(reached) < repeats
        else breach(windows, limits)
    )
    breached = sum(bool(breach([w for w in windows if w.repeat == r], limits)) for r in range(repeats))
    stability = judge_windows(windows, rules, limits.percentile)
    return Level(first.phase_index, first.load, tuple(windows), repeats, why_not, breached, stability)


def judge_levels(
    records: list[WindowRecord], repeats: int, limits: Limits, rules: WindowRules = WindowRules()
) -> tuple[Level, ...]:
    """Every level of a run judged under `limits`, in phase order."""
    phases = sorted({w.phase_index for w in records})
    return tuple(
        judge_level([w for w in records if w.phase_index == phase], repeats, limits, rules) for phase in phases
    )


def lowest(levels: tuple[Level, ...]) -> Level | None:
    return min(levels, key=lambda v: (v.load, v.phase_index), default=None)


def breached_below(levels: tuple[Level, ...], chosen: Level | None) -> list[Level]:
    """The levels below the chosen one (lower load) that breach the limits: the load axis is not monotone there, so
    the chosen level's figure holds at its load and not below it (a stepping or bisecting search never sees them; a
    grid's full ladder does)."""
    if chosen is None:
        return []
    return sorted((v for v in levels if v.load < chosen.load and not v.meets), key=lambda v: v.load)


def loads_text(loads: Iterable[float]) -> str:
    """Loads in words, as the notes name them: "4, 8"."""
    return ", ".join(f"{load:g}" for load in loads)


def _dip_note(chosen: Level, below: list[Level]) -> str:
    """The chosen level meets the limits and some lower ones do not, in words (the first lower one's reason)."""
    loads = loads_text(v.load for v in below)
    return (
        f"meets the limits at load {chosen.load:g} but not at load {loads} below it (at load {below[0].load:g}: "
        f"{below[0].why_not}): its figure holds at load {chosen.load:g}, not at every lower load"
    )


def _figures(
    level: Level,
    limits: Limits,
    within: bool,
    notes: tuple[str, ...],
    measured: Measured,
    below: tuple[float, ...],
) -> Figures:
    p = limits.percentile
    return Figures.under(
        limits,
        phase_index=level.phase_index,
        level_load=level.load,
        invocations_per_minute=level.ipm,
        max_invocations=level.ipm if within else None,
        latency_ms={name: level.latency(name) for name in PERCENTILE_NAMES},
        model_latency_ms=level.latency(p) if within else None,
        error_rate=level.error_rate,
        ipm_interval=level.interval(lambda w: w.ipm, level.ipm_resolution, measured),
        latency_interval=level.interval(lambda w: w.latency(p), LATENCY_RESOLUTION_MS, measured),
        stable=level.stability.stable,
        stability=level.stability,
        samples=level.samples(p),
        within_threshold=within,
        repeats_breached=level.breached,
        notes=notes,
        generation=level_generation(level, limits.terms, measured, LATENCY_RESOLUTION_MS),
        breached_below=below,
    )


def _notes(chosen: Level | None, level: Level, measured: Measured, limits: Limits, below: list[Level]) -> list[str]:
    notes = []
    at = f"at load {level.load:g}"
    if chosen is None:
        lowest_run = "the lowest measured" if measured.from_top_stop is not None else "the lowest"
        notes.append(
            f"no load level meets {limits.within()} and error rate <= {limits.max_error_rate:.1%}: {at} "
            f"({lowest_run}) {level.why_not}"
        )
        if measured.from_top_stop is not None:
            notes.append(from_top_note(measured.from_top_stop))
    if level.breached:
        notes.append(f"{level.breached} of {level.repeats} repeats breached {at} on their own")
    if not level.stability.stable:
        notes.append(f"unstable {at}: {level.stability.reason}")
    if chosen is not None and below:
        notes.append(_dip_note(chosen, below))
    note = stop_note(measured, limits)
    return notes + ([note] if note else [])


def from_top_note(load: float) -> str:
    """A run measured from the top down stopped at a level that met the limits it was measured with; under stricter
    ones that level breaches, and the levels below it, which could now be the answer, were never measured."""
    return (
        f"measured from the top down (traffic.until_known.from_top): the walk stopped at load {load:g}, which met the "
        "limits it was measured with, so the levels below it were not measured; to rank at these limits, set them "
        "in the experiment file (or from_top: false) and run it with --fresh"
    )


def stop_note(measured: Measured, limits: Limits) -> str | None:
    """A run stopped by the latency or error stop condition measured nothing past the stop: say so when the limits
    now decided on are looser than those it stopped at (stricter ones are fully answered by what was measured)."""
    stop, reasons = measured.stop_limits, [r for r in measured.stop_reasons or (measured.stop_reason,) if r]
    if stop is None:
        return None
    looser_latency = (
        PERCENTILES[limits.percentile] < PERCENTILES[stop.percentile] or limits.threshold_ms > stop.threshold_ms
    )
    kinds = {StopReason.parse(r).kind for r in reasons}
    latency_stop = StopKind.LATENCY in kinds and looser_latency
    error_stop = StopKind.ERROR_RATE in kinds and limits.max_error_rate > stop.max_error_rate
    if not (latency_stop or error_stop):
        return None
    return (
        f"measured up to the stop at {stop.percentile} {stop.threshold_ms:g} ms / error rate {stop.max_error_rate:.1%} "
        f"(the limits it was measured with): load levels past the stop were not measured; "
        f"`recommender run FILE --fresh` to measure further"
    )


def _mean(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
