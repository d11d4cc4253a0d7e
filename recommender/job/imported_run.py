"""Another tool's measurement stored as a run, and a stored run's per-request records read back for export.

    store_aiperf(store, run, folder, options) -> Imported    an AIPerf run as an experiment of one candidate
    run_records(store, experiment, run_id) -> LoadResult       a stored run's per-request records, for `export`

An imported run goes the way a measured one does: its request log is cut into steady-state windows and decided into a
headline (measurement/repeats.py `summarize_load`, `summarize_repeats`), stored through the run ledger, so `rank`,
`report`, `cost` and the dashboard read it like any other. Its experiment holds the AIPerf run's level (one
concurrency level for the run's duration), its endpoint as a `remote` target with the instance type and price given,
and the correctness gate off (AIPerf checked no outputs). The protocol key is a hash of the AIPerf files and the
window settings: the same folder imported again stores nothing.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from recommender.candidates import RunStatus, expand_candidates
from recommender.errors import InputError, RecommenderError
from recommender.importers.aiperf import AGGREGATE_FILE, RECORDS_FILE, AiperfRun
from recommender.load.result import LoadResult
from recommender.load.shapes import compile_traffic
from recommender.measurement.repeats import summarize_load, summarize_repeats
from recommender.metrics.records import TIMELINE_DTYPES, Timeline, joined
from recommender.metrics.rules import Rules
from recommender.spec import ExperimentSpec
from recommender.store.ledger import RunLedger
from recommender.store.results import ExperimentStatus, ResultStore

WINDOWS_PER_RUN = 10  # the default window length: the run's duration in this many windows, at most
SAMPLES_PER_WINDOW = 40  # and at least this many requests a window on average (p95 needs 20 in each)
BACKEND = "aiperf"  # what the stored run says served it: an endpoint AIPerf measured, not one recommender deployed


@dataclass(frozen=True)
class ImportOptions:
    experiment: str
    instance_type: str = "local-cpu"
    price_per_hour: float = 0.0
    warmup_seconds: float = 0.0
    window_seconds: float | None = None  # None: the run's duration / WINDOWS_PER_RUN
    run_root: Path = Path(".recommender/runs")


@dataclass(frozen=True)
class Imported:
    experiment: str
    candidate: str
    run_id: int | None  # None: the same files were imported before, nothing stored
    requests: int


def store_aiperf(store: ResultStore, run: AiperfRun, folder: Path, options: ImportOptions) -> Imported:
    """Store `run` (read from `folder`) as experiment `options.experiment`; a second import of the same files stores
    nothing; an experiment holding anything else is refused (InputError, nothing stored)."""
    spec = imported_spec(run, folder, options)
    candidate = expand_candidates(spec)[0]
    protocol = _protocol(folder, spec)
    with store.lease(spec.name):
        _check_owner(store, spec)
        experiment_id = store.save_experiment(spec, ExperimentStatus.DONE)
        candidate_id = store.save_candidate(experiment_id, candidate)
        if store.final_run(candidate_id, protocol) is not None:
            return Imported(spec.name, candidate.name, None, len(run.records))
        run_dir = options.run_root / spec.name / f"{candidate.name}-{candidate.key[:8]}"
        result = _load_result(run, spec)
        (run_dir / "load").mkdir(parents=True, exist_ok=True)
        result.to_npz(run_dir / "load" / "load.npz")
        ledger = RunLedger(store)
        opened = ledger.start(candidate_id, protocol, run_dir, None, BACKEND)
        plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
        measurement = summarize_repeats([summarize_load(result, plan, rules, [], {})], rules)
        ledger.finish(opened, RunStatus.OK, fields=measurement.store_fields())
    return Imported(spec.name, candidate.name, opened.run_id, len(run.records))


def imported_spec(run: AiperfRun, folder: Path, options: ImportOptions) -> ExperimentSpec:
    """The experiment an AIPerf run stands for: its endpoint, one concurrency level for its duration, no gate."""
    duration = math.ceil(run.duration_s * 1000) / 1000
    windows = max(1, min(WINDOWS_PER_RUN, len(run.records) // SAMPLES_PER_WINDOW))
    window = options.window_seconds or math.floor(duration / windows * 1000) / 1000
    document: dict[str, Any] = {
        "name": options.experiment,
        "description": f"AIPerf {run.aiperf_version} run of {run.model} at {run.url}{run.endpoint_path}, imported.",
        "notes": [
            f"imported from AIPerf folder {folder.resolve()}",
            "not measured by recommender: no server figures (CPU, GPU, Triton statistics), no generator self-check, "
            "no correctness gate; the candidate is the OpenAI endpoint as it is (openai-endpoint)",
        ],
        "target": {
            "kind": "remote",
            "protocol": "openai",
            "model": run.model,
            "endpoint": _base_url(run.url, run.endpoint_path),
            "instance_type": options.instance_type,
            "price_per_hour": options.price_per_hour,
        },
        "traffic": {
            "concurrency": {"users": [run.concurrency], "duration_seconds": duration},
            "warmup_seconds": options.warmup_seconds,
            "window_seconds": window,
            "until_known": False,
            "stopping": {"latency": False, "error_rate": False},
        },
        "correctness": "off",
    }
    try:
        return ExperimentSpec.model_validate(document)
    except ValueError as exc:
        raise InputError(f"{folder}: the run does not make a valid experiment: {exc}") from exc


def _base_url(url: str, endpoint_path: str) -> str:
    """The OpenAI base URL (what `/embeddings` is appended to) of AIPerf's --url and its endpoint path."""
    prefix = endpoint_path.removesuffix("/embeddings") if endpoint_path.endswith("/embeddings") else ""
    return url.rstrip("/") + prefix


def _check_owner(store: ResultStore, spec: ExperimentSpec) -> None:
    """Refuse an experiment that holds something other than this folder's import."""
    stored = next((e for e in store.experiments() if e.name == spec.name), None)
    if stored is not None and stored.spec.get("notes", [None])[:1] != spec.notes[:1]:
        raise InputError(
            f"experiment {spec.name!r} already holds other runs ({(stored.spec.get('notes') or ['measured'])[0]})",
            hint="name a new one with --experiment NAME",
        )


def _protocol(folder: Path, spec: ExperimentSpec) -> str:
    """The files' content and the window settings: the same import is found again; other windows are a new run."""
    digest = hashlib.sha256()
    for name in (RECORDS_FILE, AGGREGATE_FILE):
        digest.update((folder / name).read_bytes())
    digest.update(spec.traffic.model_dump_json().encode())
    return f"aiperf-{digest.hexdigest()[:16]}"


def _load_result(run: AiperfRun, spec: ExperimentSpec) -> LoadResult:
    """The AIPerf records as a load run (no generator timeline: AIPerf's own CPU was not sampled)."""
    empty = Timeline(**{name: np.zeros(0) for name in TIMELINE_DTYPES})
    duration = compile_traffic(spec.traffic).duration
    return LoadResult(run.records, empty, run.started_at, max(duration, run.duration_s))


def run_records(store: ResultStore, experiment: str, run_id: int | None) -> LoadResult:
    """A stored run's per-request records: every load run in its folder (repeats, levels) on one clock, in order."""
    run_dir = next((r.artifacts_dir for r in store.runs(experiment) if r.id == run_id), None)
    files = sorted(Path(run_dir).rglob("load.npz"), key=_natural) if run_dir else []
    if not files:
        raise RecommenderError(
            f"run {run_id} of {experiment!r}: no per-request records (load.npz) under {run_dir}",
            hint="its folder was removed (`recommender cleanup`?); run the experiment again to measure it",
        )
    results = [LoadResult.from_npz(path) for path in files]
    offsets = np.cumsum([0.0] + [r.duration_s for r in results[:-1]])
    records = joined([(float(o), r.requests) for o, r in zip(offsets, results, strict=True)])
    return LoadResult(records, results[0].timeline, results[0].started_at, float(sum(r.duration_s for r in results)))


def _natural(path: Path) -> list[Any]:
    """repeat-2/level-10 after repeat-2/level-9."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", path.as_posix())]
