"""Another tool's measurement stored as a run (a stored run's records go back out in job/stored_levels.py).

    store_aiperf(store, run, folder, options) -> Imported    an AIPerf run as an experiment of one candidate

An imported run goes the way a measured one does: its request log is cut into steady-state windows and decided into a
headline (measurement/repeats.py `summarize_load`, `summarize_repeats`) and stored in one transaction, its records
written first (a failed import stores nothing), so `rank`, `report`, `cost` and the dashboard read it like any other.
Its experiment holds the AIPerf run's level (one concurrency level for the run's duration), its endpoint as a `remote`
target with the instance type and price given (protocol `openai` for an embeddings run, `openai-chat` or
`openai-completions` for a generative one, whose records keep their token-level columns), and the correctness gate
off (AIPerf checked no outputs). The protocol key is a hash of the AIPerf files and the window settings: the same
folder imported again stores nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from recommender.candidates import expand_candidates
from recommender.errors import InputError
from recommender.importers.aiperf import AGGREGATE_FILE, RECORDS_FILE, AiperfRun
from recommender.load.result import PLAN_FILE, LoadResult
from recommender.load.shapes import TrafficPlan, compile_traffic
from recommender.measurement.repeats import summarize_load, summarize_repeats
from recommender.metrics.records import TIMELINE_DTYPES, Timeline
from recommender.metrics.rules import Rules
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

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
    """Store `run` (read from `folder`) as experiment `options.experiment`, all or nothing: the records are written
    under the run folder first (an unwritable --run-dir stores nothing), then the experiment, its candidate and the
    run in one transaction; a second import of the same files stores nothing; an experiment holding anything else is
    refused (InputError, nothing stored)."""
    spec = imported_spec(run, folder, options)
    candidate = expand_candidates(spec)[0]
    protocol = _protocol(folder, spec)
    result = _load_result(run, spec)
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    measurement = summarize_repeats([summarize_load(result, plan, rules, [], {})], rules)
    run_dir = (
        options.run_root / spec.name / f"{candidate.name}-{candidate.key[:8]}-{protocol.removeprefix('aiperf-')[:8]}"
    )
    with store.lease(spec.name):
        _check_owner(store, spec)
        written = _write_records(result, plan, run_dir / "load" / "load.npz", options.run_root)
        try:
            run_id = store.save_imported_run(
                spec, candidate, protocol, str(run_dir.resolve()), BACKEND, **measurement.store_fields()
            )
        except BaseException:
            if written:
                (run_dir / "load" / "load.npz").unlink(missing_ok=True)
            raise
    return Imported(spec.name, candidate.name, run_id, len(run.records))


def _write_records(result: LoadResult, plan: TrafficPlan, path: Path, root: Path) -> bool:
    """The records as the run's load.npz (written whole, then renamed into place) with its plan beside it (PLAN_FILE,
    as a measured run keeps it); False when that file is there
    already (the same import: the folder is named for the protocol, the files' hash); InputError naming --run-dir when
    it cannot be written."""
    if path.is_file():
        return False
    partial = path.with_name(f"partial-{path.name}")  # numpy names a file that does not end in .npz otherwise
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.with_name(PLAN_FILE).write_text(plan.to_json(), encoding="utf-8")
        result.to_npz(partial)
        partial.replace(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise InputError(
            f"--run-dir {root}: cannot write {path} ({exc.strerror or exc}); nothing stored",
            hint="give --run-dir a folder this user can write to",
        ) from None
    return True


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
            "protocol": run.protocol,
            "model": run.model,
            "endpoint": run.base_url,
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
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise InputError(
            f"{folder}: the run does not make a valid experiment ({problems})",
            hint="check the run's model, URL, concurrency and duration in profile_export_aiperf.json",
        ) from None


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
