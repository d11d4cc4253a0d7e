"""Measure one deployed candidate: `repeats` load runs, each cut into steady-state windows with server-side figures.

    measure(deployment, spec, bodies, out_dir, progress) -> Measurement   # what the store keeps for the run

Per repeat: the traffic plan runs in the Locust child (which stops early on a stop condition) while a parent thread
samples the server (CPU/RSS of the process tree, Triton statistics, GPU); Prometheus counters are scraped at the
start and end. The headline is decided over every repeat's windows (metrics/levels.py): MaxInvocations and
ModelLatency of the highest load level that meets the limits, with intervals and the level's stability.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from recommender.load.generators import MasterSettings, auto_workers
from recommender.load.isolation import CpuSplit, pin_processes, split_cpus
from recommender.load.runner import LoadProgress, LoadRequest, LoadResult, run_load
from recommender.load.shapes import TrafficPlan, compile_traffic
from recommender.metrics.headline import Headline, Measured, WindowCount
from recommender.metrics.host import Sample, ServerSampler, window_figures
from recommender.metrics.intervals import MIN_REPEATS
from recommender.metrics.levels import WindowRecord, decide, judge_levels
from recommender.metrics.precision import looks_between, repeat_spread
from recommender.metrics.prometheus import counter_delta, scrape
from recommender.metrics.records import joined
from recommender.metrics.rules import Rules
from recommender.metrics.selfcheck import level_flags
from recommender.metrics.steady import Window, measure_windows, phase_flags, window_spans
from recommender.metrics.stop_reason import StopKind, StopReason
from recommender.metrics.stopping import flat_between, planned_window_counts, precision_flags
from recommender.metrics.summary import PhaseSummary, WindowStats, per_second_series, summarize_phases
from recommender.metrics.triton_stats import stats_delta
from recommender.spec import ExperimentSpec
from recommender.targets.wire import Wire

_END_SLACK_S = (
    0.25  # a window ending this long after the load stopped still counts (the clock stops just past the plan)
)


class Deployed(Protocol):
    endpoint: str
    model_name: str
    metrics_url: str | None
    gpu_uuids: tuple[str, ...]
    api_key_env: str | None  # the variable holding an OpenAI endpoint's API key (each load process reads it)

    @property
    def load_url(self) -> str: ...  # what the load generator is pointed at (HTTP base URL or sagemaker://...)

    @property
    def wire(self) -> Wire: ...  # the request format: the path requests go to and the key every good answer holds

    def statistics(self) -> dict[str, Any]: ...

    def server_pids(self) -> list[int]: ...


@dataclass(frozen=True)
class Repeat:
    """One load run, summarized."""

    result: LoadResult
    windows: list[Window]
    phases: list[PhaseSummary]
    server_stats: dict[str, Any]
    from_top_stop: float | None = None  # from the top down: the load of the level that met, the levels below not run
    levels_run: tuple[int, ...] = ()  # the level indices of its level runs, in the order they ran (precision mode)
    looks: int = 1  # precision mode: the most looks a level's stopping rule had (metrics/precision.py)
    known_levels: tuple[int, ...] = ()  # precision mode: the level indices whose run ended because it was known


@dataclass(frozen=True)
class Measurement:
    """Everything stored for a run (keyword arguments of ResultStore.finish_run)."""

    headline: Headline
    server_stats: dict[str, Any]
    phases: list[PhaseSummary]
    series: list[WindowStats]
    windows: list[tuple[int, Window]]

    def store_fields(self) -> dict[str, Any]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


def measure(
    deployment: Deployed,
    spec: ExperimentSpec,
    bodies: list[dict],
    out_dir: Path,
    progress: Callable[[LoadProgress], None] | None = None,
) -> Measurement:
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    split = split_cpus(spec.traffic.generator_cpus)
    order = from_top_order(plan, rules)
    repeats: list[Repeat] = []
    for number in range(spec.traffic.repeats):
        folder = out_dir if spec.traffic.repeats == 1 else out_dir / f"repeat-{number + 1}"
        workers = _workers(spec.traffic.workers, repeats[-1].result if repeats else None, split)
        repeats.append(
            measure_once(
                deployment,
                plan,
                rules,
                bodies,
                folder,
                progress,
                workers,
                split,
                MasterSettings.from_traffic(spec.traffic),
                order,
                spec.traffic.request_encoding,
            )
        )
        if order is not None:  # from the top: the other repeats measure the level the first one stopped at
            order = [repeats[0].levels_run[-1]]
        if known_over_repeats(repeats, rules, spec.traffic.repeats):
            break
    return summarize_repeats(repeats, rules, spec.traffic.repeats)


def from_top_order(plan: TrafficPlan, rules: Rules) -> list[int] | None:
    """The plan's level indices by load, the highest first, when the levels run from the top down (None: in order)."""
    if not rules.stop.from_top or rules.stop.known_within is None or len(plan.levels) < 2:
        return None
    return sorted(range(len(plan.levels)), key=lambda index: plan.levels[index].load, reverse=True)


def known_over_repeats(repeats: list[Repeat], rules: Rules, most: int) -> bool:
    """Measure until known, over repeats: the interval over repeat means of the level decided so far is within
    `traffic.until_known` (corrected for the looks from the third repeat to the last allowed); False outside precision
    mode or before MIN_REPEATS repeats."""
    target = rules.stop.known_within
    if target is None or len(repeats) < MIN_REPEATS or len(repeats) >= most:
        return False
    headline = summarize_repeats(repeats, rules, most).headline
    found = repeat_spread(headline.ipm_interval, headline.latency_interval, looks_between(MIN_REPEATS, most))
    return found.within(target)


def _workers(setting: int | str, previous: LoadResult | None, split: CpuSplit) -> int:
    """`traffic.workers`, `auto` resolved from the previous repeat's busiest second (load/generators.auto_workers)."""
    if setting != "auto":
        return int(setting)
    cores = len(split.generator) + 1 if split.generator else os.cpu_count()  # the rule keeps one core free
    peak = float(previous.timeline.cpu_percent.max()) if previous is not None and len(previous.timeline.t_s) else None
    return auto_workers(peak, cores)


def measure_once(
    deployment: Deployed,
    plan: TrafficPlan,
    rules: Rules,
    bodies: list[dict],
    out_dir: Path,
    progress: Callable[[LoadProgress], None] | None = None,
    workers: int = 1,
    split: CpuSplit = CpuSplit(None, None),
    master: MasterSettings = MasterSettings(),
    order: list[int] | None = None,
    encoding: str = "json",
) -> Repeat:
    """One repeat of the plan: one load run, or in precision mode one load run per level (each ending once its
    figures are known), joined on one clock; the server is read before the first and after the last.

    `order`: the level indices to run, in that order (from_top_order, or the one level a from-the-top walk stopped
    at); with more than one, the walk down stops at the first level that meets the limits on this repeat's windows."""
    prometheus_before, before = scrape(deployment.metrics_url), deployment.statistics()
    pinned = pin_processes(deployment.server_pids(), split.server) if split.server else 0
    runs: list[tuple[int, TrafficPlan, LoadResult]] = []
    walk, stopped_at = order is not None and len(order) > 1, None
    with ServerSampler(deployment) as sampler:
        for index, part, folder in level_runs(plan, rules, out_dir, order):
            request = LoadRequest(
                endpoint=deployment.load_url,
                model_name=deployment.model_name,
                bodies=bodies,
                phases=part,
                out_dir=folder,
                rules=rules,
                workers=workers,
                generator_cpus=split.generator,
                master=master,
                path=deployment.wire.path(deployment.model_name),
                answer_key=deployment.wire.answer_key,
                wire=deployment.wire.name,
                stream=deployment.wire.stream,
                api_key_env=deployment.api_key_env or "",
                encoding=encoding,
            )
            runs.append((index, part, run_load(request, progress=progress)))
            if rules.stop.flat and not walk and len(runs) > 1:
                runs[-1] = _flat_across(runs[-2], runs[-1], rules)
            if walk:  # a breach (a limit's stop included) goes one level down; a level that meets ends the walk
                if _meets(summarize_load(runs[-1][2], part, rules, sampler.samples, {}), rules):
                    stopped_at = None if index == (order or [])[-1] else part.levels[0].load
                    break
            elif ends_plan(runs[-1][2].stop_reason):
                break
    after, prometheus_after = deployment.statistics(), scrape(deployment.metrics_url)
    result = join_results([r for _, _, r in runs])
    generator = split.to_dict() | {
        "server_threads_pinned": pinned,
        "workers": result.workers,
        "remote_workers": master.remote_workers,
        "clocks": list(result.generators),
        "lost_workers": list(result.lost_workers),
    }
    server = stats_delta(before, after).to_dict() | {
        "prometheus": counter_delta(prometheus_before, prometheus_after),
        "gpu": sampler.gpu_status,
        "generator": generator,
    }
    known = tuple(index for index, _, r in runs if r.stop_reason is not None and not ends_plan(r.stop_reason))
    if len(runs) == 1 and runs[0][1] is plan:
        return dataclasses.replace(summarize_load(result, plan, rules, sampler.samples, server), known_levels=known)
    parts = [(index, summarize_load(r, part, rules, sampler.samples, server)) for index, part, r in runs]
    ran = tuple(index for index, _, _ in runs)
    joined = join_levels(parts, server)
    return dataclasses.replace(joined, from_top_stop=stopped_at, levels_run=ran, known_levels=known)


def _flat_across(
    previous: tuple[int, TrafficPlan, LoadResult], current: tuple[int, TrafficPlan, LoadResult], rules: Rules
) -> tuple[int, TrafficPlan, LoadResult]:
    """`stopping.flat_invocations` between two level runs (precision mode: each level a load run of its own, so the
    load child never sees the level before): the current run, with the flat stop as its stop reason when it fired
    (which ends the plan, as it does within one run)."""
    index, part, result = current
    if result.stop_reason is not None and ends_plan(result.stop_reason):
        return current
    before = summarize_load(previous[2], previous[1], rules, [], {}).windows
    now = summarize_load(result, part, rules, [], {}).windows
    reason = flat_between(before, now, rules)
    return current if reason is None else (index, part, dataclasses.replace(result, stop_reason=reason.text))


def _meets(repeat: Repeat, rules: Rules) -> bool:
    """The one level of a level run meets the limits on its own windows."""
    level = judge_levels([WindowRecord.of(0, w) for w in repeat.windows], 1, rules.limits, rules.windows)
    return bool(level) and level[0].meets


def level_runs(
    plan: TrafficPlan, rules: Rules, out_dir: Path, order: list[int] | None = None
) -> list[tuple[int, TrafficPlan, Path]]:
    """(level index, plan, folder) of each load run of one repeat: the whole plan, or in precision mode (and more
    than one level) each level alone, so that each can end as soon as it is known (metrics/stopping.py); `order`:
    those levels only, in that order."""
    if order is None and (rules.stop.known_within is None or len(plan.levels) == 1):
        return [(0, plan, out_dir)]
    return [
        (index, plan.with_levels((plan.levels[index],)), out_dir / f"level-{index + 1}")
        for index in (order if order is not None else range(len(plan.levels)))
    ]


def ends_plan(stop_reason: str | None) -> bool:
    """A load run's stop that ends the plan (a limit breached, a cap reached), not a level known early."""
    return stop_reason is not None and StopReason.parse(stop_reason).kind is not StopKind.PRECISION


def join_results(results: list[LoadResult]) -> LoadResult:
    """Load runs that followed each other as one: records on one clock (each run's shifted by the ones before; the
    pauses between them are left out), the stop that ended the plan, the last run's generators."""
    if len(results) == 1:
        return dataclasses.replace(results[0], stop_reason=_plan_stop(results))
    offsets = _offsets(results)
    return LoadResult(
        requests=joined([(offset, r.requests) for offset, r in zip(offsets, results, strict=True)]),
        timeline=joined([(offset, r.timeline) for offset, r in zip(offsets, results, strict=True)]),
        started_at=results[0].started_at,
        duration_s=sum(r.duration_s for r in results),
        stop_reason=_plan_stop(results),
        generators=results[-1].generators,
        lost_workers=tuple(
            entry | {"t_s": entry["t_s"] + offset}
            for offset, r in zip(offsets, results, strict=True)
            for entry in r.lost_workers
        ),
    )


def join_levels(parts: list[tuple[int, Repeat]], server_stats: dict[str, Any]) -> Repeat:
    """Level runs as one repeat: level index as phase index, windows and phases shifted onto the joined clock."""
    offsets = _offsets([repeat.result for _, repeat in parts])
    windows: list[Window] = []
    phases: list[PhaseSummary] = []
    for offset, (index, repeat) in zip(offsets, parts, strict=True):
        windows += [dataclasses.replace(w, phase_index=index, stats=shifted(w.stats, offset)) for w in repeat.windows]
        phases += [
            dataclasses.replace(
                p,
                index=index,
                stats=shifted(p.stats, offset),
                phase_start_s=p.phase_start_s + offset,
                phase_end_s=p.phase_end_s + offset,
            )
            for p in repeat.phases
        ]
    looks = max(repeat.looks for _, repeat in parts)
    return Repeat(join_results([repeat.result for _, repeat in parts]), windows, phases, server_stats, looks=looks)


def shifted(stats: WindowStats, offset: float) -> WindowStats:
    return dataclasses.replace(stats, start_s=stats.start_s + offset, end_s=stats.end_s + offset)


def _offsets(results: list[LoadResult]) -> list[float]:
    return [sum(r.duration_s for r in results[:k]) for k in range(len(results))]


def _plan_stop(results: list[LoadResult]) -> str | None:
    return next((r.stop_reason for r in results if ends_plan(r.stop_reason)), None)


def summarize_load(
    result: LoadResult, plan: TrafficPlan, rules: Rules, samples: list[Sample], server_stats: dict[str, Any]
) -> Repeat:
    """Windows (with server figures) and phases (with stability and flags) of one load run."""
    spans = [span for span in spans_of(plan, rules) if span[2] <= result.duration_s + _END_SLACK_S]
    loads, planned = [level.load for level in plan.levels], planned_window_counts(spans_of(plan, rules))
    windows = [
        dataclasses.replace(w, server=window_figures(samples, result.started_at, w.stats.start_s, w.stats.end_s))
        for w in measure_windows(result.requests, spans, loads, rules, result.timeline)
    ]
    ran = [(start, end) for start, end in plan.windows() if start < result.duration_s]
    phases = [
        dataclasses.replace(
            p,
            stable=any(w.stable for w in mine),
            flags=tuple(
                phase_flags(mine, rules.windows)
                + level_flags(mine, ran[p.index], result.timeline, result.lost_workers, result.requests)
                + precision_flags(mine, rules, planned.get(p.index, 0), result.stop_reason)
            ),
        )
        for p in summarize_phases(result.requests, ran, rules.windows.warmup_s)
        for mine in [[w for w in windows if w.phase_index == p.index]]
    ]
    looks = max((looks_between(rules.first_look, count) for count in planned.values()), default=1)
    return Repeat(result, windows, phases, server_stats, looks=looks if rules.stop.known_within is not None else 1)


def spans_of(plan: TrafficPlan, rules: Rules) -> list[tuple[int, float, float]]:
    """The plan's steady-state windows: (level index, start, end) on the load clock."""
    return window_spans(plan.windows(), rules.windows.warmup_s, rules.windows.window_s)


def summarize_repeats(repeats: list[Repeat], rules: Rules, most: int | None = None) -> Measurement:
    """The run's headline over every repeat; phases and the per-second series come from the first repeat. `most`:
    the most repeats the stopping rule allowed (default: those run)."""
    first = repeats[0]
    series = [
        dataclasses.replace(s, users_max=_users_at(first.result, second))
        for second, s in enumerate(per_second_series(first.result.requests, first.result.duration_s))
    ]
    windows = [(number, w) for number, repeat in enumerate(repeats) for w in repeat.windows]
    records = [WindowRecord.of(number, w) for number, w in windows]
    decision = decide(records, measured_of(repeats, rules, most), rules.limits, rules.windows)
    return Measurement(decision.headline, decision.server_stats(first.server_stats), first.phases, series, windows)


def measured_of(repeats: list[Repeat], rules: Rules, most: int | None = None) -> Measured:
    """What the repeats measured whatever the limits: requests, failures, stop reasons, flags, window counts, and
    `most`, the most repeats their stopping rule allowed (default: those run)."""
    log = [r.result.requests for r in repeats]
    windows = [w for r in repeats for w in r.windows]
    return Measured(
        repeats=len(repeats),
        requests=sum(len(requests) for requests in log),
        failures=sum(requests.failures for requests in log),
        stop_reason=next((r.result.stop_reason for r in repeats if r.result.stop_reason), None),
        stop_reasons=tuple(r.result.stop_reason for r in repeats),
        flags=tuple(dict.fromkeys(flag for r in repeats for phase in r.phases for flag in phase.flags)),
        windows=WindowCount(
            seconds=max((w.stats.end_s - w.stats.start_s for w in windows), default=None),
            measured=len(windows),
            stable=sum(w.stable for w in windows),
        ),
        stop_limits=rules.stop_limits,
        from_top_stop=repeats[0].from_top_stop,
        most_repeats=most or len(repeats),
        window_looks=max(r.looks for r in repeats),
        repeat_looks=repeat_looks(rules, most or len(repeats)),
        known_levels=tuple(sorted({index for r in repeats for index in r.known_levels})),
    )


def repeat_looks(rules: Rules, most: int) -> int:
    """The looks the repeats' stopping rule has (known_over_repeats: from the third repeat to `most`); 1 when it
    cannot stop them early."""
    if rules.stop.known_within is None or most <= MIN_REPEATS:
        return 1
    return looks_between(MIN_REPEATS, most)


def _users_at(result: LoadResult, second: int) -> int:
    """Active users during a given second, from the load driver's once-a-second timeline."""
    timeline = result.timeline
    inside = (timeline.t_s >= second) & (timeline.t_s < second + 1)
    return int(timeline.users[inside].max()) if inside.any() else 0
