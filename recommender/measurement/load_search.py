"""Per candidate, a load search instead of the fixed schedule: the traffic plan's levels, sorted by load, are tried in
exponentially growing steps upwards and bisected after the first breach, stopping at the knee (a meeting level whose
mean IPM grows less than `knee_tolerance` over the previous meeting one). Every level is one load run on the same
deployment (measurement.measure_once), judged by the same windows, stability and level rules (metrics/levels.py).

    LoadSearch(count, knee, capacity_first).ask() -> level index | None;  .tell(index, meets, ipm)
    LoadSearch(...).found -> the highest meeting index
    Bisection(count, fall, capacity_first)  # the same ask/tell for a generative probe: bisect for the SLO boundary
    level_objective(level, limits) -> what a tried level is judged on (goodput/min of a generative level, else IPM)
    search_load(...) -> Measurement        # every level run stored as one run: level k is phase k, repeat 0
    probe_length(windows, seconds) -> s    # each level a probe tries: the set length, else warm-up + 1 window
    measure_level(...) -> Measurement      # the final measurement: `repeats` load runs at the found level only
    measure_work(work, ...) -> Measurement # what a search strategy's Work asks for (the job calls this)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

from recommender.load.runner import LoadProgress
from recommender.load.shapes import PlanLevel, TrafficPlan, compile_traffic
from recommender.measurement.repeats import (
    Deployed,
    Measurement,
    Repeat,
    join_levels,
    known_over_repeats,
    measure,
    measure_once,
    measured_of,
    summarize_repeats,
)
from recommender.metrics.levels import Level, WindowRecord, decide, judge_levels
from recommender.metrics.limits import Limits
from recommender.metrics.rules import Rules, WindowRules
from recommender.metrics.summary import per_second_series
from recommender.search.work import Work
from recommender.spec import ExperimentSpec


class LoadSearch:
    """Ask/tell over levels sorted by load: step up (1, 2, 4 ... indices), bisect after a breach, stop at the knee.

    capacity_first: the highest level is tried first; when it meets the limits it is the found level at once (the
    most a candidate can serve within them, what racing judges), else the search goes on below it as above."""

    def __init__(self, count: int, knee_tolerance: float, capacity_first: bool = False) -> None:
        self.count, self.knee_tolerance = count, knee_tolerance
        self.low, self.high = -1, count  # highest meeting index so far; lowest breaching index so far
        self.step, self.next, self.done = 1, 0, count == 0
        self.best_ipm: float | None = None
        self.top_first = capacity_first and count > 1
        if self.top_first:
            self.next = count - 1

    def ask(self) -> int | None:
        return None if self.done else self.next

    def tell(self, index: int, meets: bool, ipm: float) -> None:
        if self.top_first:  # the highest level's answer: found there, or the search below it
            self.top_first = False
            if meets:
                self.low, self.best_ipm, self.done = index, ipm, True
            else:
                self.high, self.next = index, 0
            return
        if meets:
            knee = self.best_ipm is not None and index > self.low and ipm < self.best_ipm * (1 + self.knee_tolerance)
            self.low, self.best_ipm = max(self.low, index), max(ipm, self.best_ipm or 0.0)
            if knee:
                self.done = True
                return
            self.step *= 2
        else:
            self.high = min(self.high, index)
        self._advance(meets)

    def _advance(self, stepping: bool) -> None:
        if self.high - self.low <= 1:
            self.done = True
        elif stepping and self.high == self.count:
            self.next = min(self.low + self.step // 2, self.count - 1)
        else:
            self.next = (self.low + self.high) // 2

    @property
    def found(self) -> int | None:
        return self.low if self.low >= 0 else None


class Bisection:
    """Ask/tell over levels sorted by load for a generative probe, as AIPerf's `monotonic_sla` searches concurrency:
    the highest level meeting the SLOs by bisection, at most ceil(log2(count + 1)) looks, plus one when
    `capacity_first` tries the highest level first (found at once when it meets).

    It assumes the load axis is monotone for the SLOs: every level below a meeting one meets, every level above a
    breaching one breaches, and goodput grows with the load up to that boundary. A level that contradicts it, one
    meeting the SLOs with a goodput more than `fall` below a lower meeting level's (more load, fewer requests within
    the SLOs: past the server's saturation), ends the search there (no higher level is tried: they would serve still
    less), and the run's flags say so (`notes`)."""

    def __init__(self, count: int, fall: float, capacity_first: bool = False) -> None:
        self.count, self.fall = count, fall
        self.low, self.high = -1, count  # highest meeting index so far; lowest breaching index so far
        self.top_first = capacity_first and count > 1
        self.done = count == 0
        self.met: dict[int, float] = {}  # meeting index -> its goodput (the objective)
        self.looks = 0
        self.notes: list[str] = []

    def ask(self) -> int | None:
        if self.done:
            return None
        return self.count - 1 if self.top_first else (self.low + self.high) // 2

    def tell(self, index: int, meets: bool, value: float) -> None:
        self.looks, self.top_first = self.looks + 1, False
        if meets:
            below = max((v for i, v in self.met.items() if i < index), default=None)
            self.met[index], self.low = value, max(self.low, index)
            if below is not None and value * (1 + self.fall) < below:
                self.done = True
                self.notes.append(
                    f"load level {index + 1} met the SLOs with a goodput of {value:,.0f}/min, below "
                    f"{below:,.0f}/min at a lower level: not monotone in the load, the bisection searched no higher"
                )
                return
        else:
            self.high = min(self.high, index)
        self.done = self.high - self.low <= 1

    @property
    def found(self) -> int | None:
        return self.low if self.low >= 0 else None


def level_objective(level: Level, limits: Limits) -> float:
    """A tried level's figure for the load search: the mean goodput per minute (requests within every SLO) of its
    windows when they are generative, else its mean IPM."""
    goodput = [w.generation.goodput(limits.terms) * 60 for w in level.windows if w.generation is not None]
    return sum(goodput) / len(goodput) if goodput else level.ipm


def levels_by_load(plan: TrafficPlan) -> list[PlanLevel]:
    """The plan's levels sorted by offered load (rate for open loop, users for closed loop)."""
    return sorted(plan.levels, key=lambda level: level.load)


def search_load(
    deployment: Deployed,
    spec: ExperimentSpec,
    bodies: list[dict],
    out_dir: Path,
    knee_tolerance: float,
    progress: Callable[[LoadProgress], None] | None = None,
    seconds: float | None = None,
    capacity_first: bool = False,
    bisect: bool = False,
) -> Measurement:
    """The load search on one deployment; each tried level is a short load run of its own (1 repeat, `seconds`,
    never ended early for precision: a probe is brief by design); `capacity_first`: the highest level first;
    `bisect`: a Bisection (a generative candidate: goodput under the SLOs), else the stepping LoadSearch."""
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    rules = dataclasses.replace(rules, stop=dataclasses.replace(rules.stop, known_within=None))
    levels = [shortened(level, probe_length(rules.windows, seconds)) for level in levels_by_load(plan)]
    search: LoadSearch | Bisection = (
        Bisection(len(levels), knee_tolerance, capacity_first)
        if bisect
        else LoadSearch(len(levels), knee_tolerance, capacity_first)
    )
    runs = []
    while (index := search.ask()) is not None:
        one = plan.with_levels((levels[index],))
        folder, encoding = out_dir / f"level-{index + 1}", spec.traffic.request_encoding
        repeat = measure_once(deployment, one, rules, bodies, folder, progress, encoding=encoding)
        level = judge_levels([WindowRecord.of(0, w) for w in repeat.windows], 1, rules.limits, rules.windows)
        search.tell(index, bool(level) and level[0].meets, level_objective(level[0], rules.limits) if level else 0.0)
        runs.append((index, repeat))
    return combine_levels(runs, rules, tuple(search.notes) if isinstance(search, Bisection) else ())


def probe_length(windows: WindowRules, seconds: float | None = None) -> float:
    """Seconds of each level a probe tries: `seconds` when the experiment sets `search.racing.probe_seconds`, else
    the warm-up and one window. A probe is one run, so its figure is a point either way (no interval: racing widens
    it by its margin); a second window would only average that point, at one window more per level tried
    (docs/design.md "Search": why one window)."""
    return seconds or windows.warmup_s + windows.window_s


def shortened(level: PlanLevel, seconds: float) -> PlanLevel:
    """The level cut to `seconds` (the probe's length), unless that would change its offered load (a ramp)."""
    short = dataclasses.replace(level, duration_seconds=min(seconds, level.duration_seconds))
    return short if short.load == level.load else level


def combine_levels(runs: list[tuple[int, Repeat]], rules: Rules, notes: tuple[str, ...] = ()) -> Measurement:
    """Level runs as one stored run: level index as phase index, times shifted to follow each other, repeat 0;
    `notes`, what the load search found (a contradiction of its assumption), among its flags."""
    joined = join_levels(runs, runs[0][1].server_stats)
    windows = [(0, w) for w in joined.windows]
    series = [s for _, repeat in runs for s in per_second_series(repeat.result.requests, repeat.result.duration_s)]
    measured = measured_of([r for _, r in runs], rules)
    measured = dataclasses.replace(
        measured, repeats=1, stop_reasons=(measured.stop_reason,), most_repeats=1, flags=measured.flags + notes
    )
    records = [WindowRecord.of(number, w) for number, w in windows]
    decision = decide(records, measured, rules.limits, rules.windows)
    server = decision.server_stats(runs[0][1].server_stats)
    return Measurement(decision.headline, server, joined.phases, series, windows)


def measure_level(
    deployment: Deployed,
    spec: ExperimentSpec,
    bodies: list[dict],
    out_dir: Path,
    load: float,
    repeats: int,
    progress: Callable[[LoadProgress], None] | None = None,
) -> Measurement:
    """Up to `repeats` load runs at the one level whose load is `load` (the level the load search found); in precision
    mode each ends once known, and the repeats end once known over repeats."""
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    level = next(v for v in plan.levels if v.load == load)
    one = plan.with_levels((level,))
    runs: list[Repeat] = []
    for number in range(repeats):
        folder, encoding = out_dir / f"repeat-{number + 1}", spec.traffic.request_encoding
        runs.append(measure_once(deployment, one, rules, bodies, folder, progress, encoding=encoding))
        if known_over_repeats(runs, rules, repeats):
            break
    return summarize_repeats(runs, rules, repeats)


def measure_work(
    work: Work,
    deployment: Deployed,
    spec: ExperimentSpec,
    bodies: list[dict],
    out_dir: Path,
    progress: Callable[[LoadProgress], None] | None = None,
) -> Measurement:
    """What the work's stage asks for: the whole plan (full), a load search (probe), repeats at one level (final)."""
    if work.stage == "probe":
        return search_load(
            deployment,
            spec,
            bodies,
            out_dir,
            work.knee_tolerance,
            progress,
            work.seconds,
            work.capacity_first,
            work.bisect,
        )
    if work.stage == "final":
        assert work.level is not None  # a final stage always carries the level its probe found (search/adaptive.py)
        return measure_level(deployment, spec, bodies, out_dir, work.level, work.repeats, progress)
    return measure(deployment, spec, bodies, out_dir, progress)
