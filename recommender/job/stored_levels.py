"""A stored run's per-request records, one part per load run and level, each with the load it offered: what
`recommender export --format aiperf` writes as one AIPerf folder each.

    stored_levels(store, spec, run_id) -> [StoredLevel]    ordered by load, then repeat; warm-up left out

A run's folder holds one load.npz per load run (the whole plan, or one level of it, per repeat), each with the plan it
ran beside it (load/result.py PLAN_FILE). A load run of several levels is cut at the levels' bounds; each level's
warm-up (metrics/steady.py `window_spans`: what the windows leave out) is left out. A run measured before plans were
kept beside its records has only the experiment's plan to go by, which tells the levels apart only in a load run of
the whole plan (no `level-N` folder); anything else is refused, naming the file.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recommender.errors import RecommenderError
from recommender.importers.aiperf import CONCURRENCY, RATE, Load
from recommender.load.result import PLAN_FILE, SENT_TO_FILE, LoadResult
from recommender.load.shapes import TrafficPlan, compile_traffic
from recommender.metrics.records import RequestLog
from recommender.metrics.rules import Rules
from recommender.metrics.steady import window_spans
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore


@dataclass(frozen=True)
class StoredLevel:
    """The steady-state records of one level of one load run: t_s from `started_at` (epoch s, its first send)."""

    load: Load
    repeat: int  # 1, 2, ... (1 for a run of one repeat)
    records: RequestLog
    started_at: float
    source: Path  # the load.npz it was cut from
    sent_to: str | None = None  # where its requests were sent (load/result.py SENT_TO_FILE); None: not kept


def stored_levels(store: ResultStore, spec: ExperimentSpec, run_id: int | None) -> list[StoredLevel]:
    """Every level of every load run of stored run `run_id` of `spec`'s experiment, by load, then repeat."""
    run_dir = next((r.artifacts_dir for r in store.runs(spec.name) if r.id == run_id), None)
    files = sorted(Path(run_dir).rglob("load.npz")) if run_dir else []
    if not files:
        raise RecommenderError(
            f"run {run_id} of {spec.name!r}: no per-request records (load.npz) under {run_dir}",
            hint="its folder was removed (`recommender cleanup`?); run the experiment again to measure it",
        )
    windows = Rules.from_spec(spec).windows
    levels = [level for path in files for level in _levels(path, _plan(path, spec), windows.warmup_s, windows.window_s)]
    return sorted(levels, key=lambda level: (level.load.value, level.repeat, str(level.source)))


def _plan(path: Path, spec: ExperimentSpec) -> TrafficPlan:
    """The plan the load run at `path` ran: the one kept beside it, else the experiment's (a whole-plan run only)."""
    kept = path.with_name(PLAN_FILE)
    if kept.is_file():
        return TrafficPlan.from_json(kept.read_text(encoding="utf-8"))
    if any(part.startswith("level-") for part in path.parts):
        raise RecommenderError(
            f"{path}: a load run of one level, measured before its plan was kept beside it ({PLAN_FILE}): which "
            "level it ran cannot be told",
            hint="run the experiment again (`recommender run --fresh`) to export it level by level",
        )
    return compile_traffic(spec.traffic)


def _levels(path: Path, plan: TrafficPlan, warmup_s: float, window_s: float) -> list[StoredLevel]:
    result = LoadResult.from_npz(path)
    log, repeat = result.requests, _repeat(path)
    spans = window_spans(plan.windows(), warmup_s, window_s)
    parts = []
    for index, (level, (_, end)) in enumerate(zip(plan.levels, plan.windows(), strict=True)):
        steady = min(start for phase, start, _ in spans if phase == index)
        keep = (log.t_s >= steady) & (log.t_s < end)
        if not np.any(keep):
            continue  # a level the run never reached (it stopped early)
        first = float(log.t_s[keep].min())
        part = log.rows(keep)
        records = dataclasses.replace(part, t_s=part.t_s - first, late_us=None)
        load = (
            Load(RATE, level.rate, plan.arrival or "constant")
            if level.rate is not None
            else Load(CONCURRENCY, level.load)
        )
        parts.append(StoredLevel(load, repeat, records, result.started_at + first, path, sent_to(path)))
    return parts


def sent_to(path: Path) -> str | None:
    """The URL the load run at `path` sent its requests to, as kept beside it; None for a run measured before it was
    kept (or whose file is unreadable: the URL is a label, not a figure)."""
    try:
        url = json.loads(path.with_name(SENT_TO_FILE).read_text(encoding="utf-8")).get("url")
    except (OSError, ValueError, AttributeError):
        return None
    return url if isinstance(url, str) and url else None


def _repeat(path: Path) -> int:
    """The repeat a load run belongs to: its `repeat-N` folder, 1 without one."""
    numbers = [int(m.group(1)) for part in path.parts if (m := re.fullmatch(r"repeat-(\d+)", part))]
    return numbers[-1] if numbers else 1
