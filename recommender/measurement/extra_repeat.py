"""One further repeat of a stored measurement at the level its figures come from (measuring tied leaders more: issue
37 item 7), folded into the stored run as the next repeat.

    measure_extra(deployment, spec, bodies, out_dir, headline, records, server_stats, progress) -> ExtraRepeat

The repeat runs the level alone, with the workers and CPU split of the stored run; its windows carry the level's
phase index of the stored run and the next repeat number, so the run's headline is decided again over every repeat's
windows as any run's is (metrics/levels.py: a level the further repeat did not run is "reached by k of n repeats",
as after a from-the-top walk). The run keeps its reuse key: the experiment's traffic still describes it, and it is
complete with more repeats than it asked for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recommender.load.generators import MasterSettings
from recommender.load.isolation import split_cpus
from recommender.load.runner import LoadProgress
from recommender.load.shapes import compile_traffic
from recommender.measurement.repeats import Deployed, measure_once, repeat_looks
from recommender.metrics.headline import Headline, Measured, WindowCount
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.rules import Rules
from recommender.metrics.steady import Window
from recommender.spec import ExperimentSpec


@dataclass(frozen=True)
class ExtraRepeat:
    """The run's headline and server figures decided again with the further repeat, and that repeat's windows as
    (repeat, window)."""

    headline: Headline
    server_stats: dict[str, Any]
    windows: list[tuple[int, Window]]


def measure_extra(
    deployment: Deployed,
    spec: ExperimentSpec,
    bodies: list[dict],
    out_dir: Path,
    headline: Headline,
    records: list[WindowRecord],
    server_stats: Mapping[str, Any],
    progress: Callable[[LoadProgress], None] | None = None,
) -> ExtraRepeat:
    """One more repeat of the level `headline` was decided at (`records`: the run's stored windows; `server_stats`:
    the run's stored server figures, whose generator's worker count the repeat keeps)."""
    if headline.phase_index is None or headline.level_load is None:
        raise ValueError("a run without a decided level has no level to repeat")
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    level = next(v for v in plan.levels if v.load == headline.level_load)
    split = split_cpus(spec.traffic.generator_cpus)
    workers = int((server_stats.get("generator") or {}).get("workers") or 1)
    repeat = measure_once(
        deployment,
        plan.with_levels((level,)),
        rules,
        bodies,
        out_dir,
        progress,
        workers,
        split,
        MasterSettings.from_traffic(spec.traffic),
        encoding=spec.traffic.request_encoding,
    )
    number = headline.repeats
    windows = [(number, dataclasses.replace(w, phase_index=headline.phase_index)) for w in repeat.windows]
    measured = _with_repeat(headline.measured, repeat.result, [w for _, w in windows], rules)
    every = [*records, *(WindowRecord.of(n, w) for n, w in windows)]
    decision = decide(every, measured, rules.limits, rules.windows)
    return ExtraRepeat(decision.headline, decision.server_stats(server_stats), windows)


def _with_repeat(measured: Measured, result, windows: list[Window], rules: Rules) -> Measured:
    """What was measured, with one repeat more; the cap of its stopping rule grows with it (the looks with the cap)."""
    most = (measured.most_repeats or measured.repeats) + 1
    count = measured.windows
    return dataclasses.replace(
        measured,
        repeats=measured.repeats + 1,
        requests=measured.requests + len(result.requests),
        failures=measured.failures + result.requests.failures,
        stop_reasons=(*measured.stop_reasons, result.stop_reason),
        windows=WindowCount(
            seconds=count.seconds,
            measured=count.measured + len(windows),
            stable=count.stable + sum(w.stable for w in windows),
            chosen=count.chosen,
            at_level=count.at_level,
        ),
        most_repeats=most,
        repeat_looks=repeat_looks(rules, most),
    )
