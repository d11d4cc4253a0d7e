"""`recommender export EXPERIMENT --out DIR`: the chosen configuration as a deployable Triton repository;
`--format aiperf --out DIR`: its run's per-request records in AIPerf's format, one folder per level and repeat;
`--mlflow URI`: every candidate as an MLflow run (with the report, and the deliverable when --out is given)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.errors import UsageError
from recommender.files import paths
from recommender.files.destination import claim_folder
from recommender.importers.aiperf import aiperf_endpoint_type, aiperf_url, write_aiperf
from recommender.job.stored_levels import StoredLevel, stored_levels
from recommender.redaction import redact
from recommender.report.deliverable import Deliverable, ExportOptions, chosen, write_deliverable
from recommender.review import recommend_from_store
from recommender.store.results import ResultStore
from recommender.tracking.export import export_experiment


class ExportFormat(StrEnum):
    """What --out receives."""

    DELIVERABLE = "deliverable"  # a deployable Triton repository with the SageMaker and autoscaling requests
    AIPERF = "aiperf"  # the run's per-request records as AIPerf's profile_export.jsonl and aggregate JSON


def export_command(
    experiment: str = options.EXPERIMENT,
    out: Path | None = typer.Option(
        None, "--out", help="Folder to write the export into (new or empty, unless --force)."
    ),
    mlflow: str | None = typer.Option(
        None,
        "--mlflow",
        help="MLflow tracking server URI (e.g. http://127.0.0.1:5000): one MLflow run per candidate (configuration "
        "as params; MaxInvocations, percentile latencies, error rate, cost, interval bounds, verdict as metrics; "
        "per-window series as step metrics; the report as artifacts, and the --out deliverable on its candidate's "
        "run). Exporting again updates those runs.",
    ),
    format_: ExportFormat = typer.Option(
        ExportFormat.DELIVERABLE,
        "--format",
        help="deliverable: a deployable Triton repository; aiperf: the candidate's per-request records as AIPerf "
        "0.13.0 writes them (profile_export.jsonl, profile_export_aiperf.json), one folder per level and repeat "
        "with the load it offered (concurrency or rate), warm-up left out, numbered by load.",
    ),
    position: int = typer.Option(1, "--rank", min=1, help="Which ranked candidate to export (1 = the recommendation)."),
    db: str = options.DB,
    image: str | None = typer.Option(
        None, "--image", help="Serving image URI for create_model.json (else a placeholder)."
    ),
    endpoint_name: str | None = typer.Option(
        None, "--endpoint-name", help="SageMaker endpoint name (default: experiment-configuration)."
    ),
    cache_dir: Path = typer.Option(paths.ARTIFACTS, "--cache-dir", help="Model export cache (shared with `run`)."),
    force: bool = options.FORCE,
    threshold_ms: float = options.THRESHOLD_MS,
    percentile: options.PercentileChoice = options.PERCENTILE,
    max_error_rate: float = options.MAX_ERROR_RATE,
) -> None:
    """Export a ranked configuration as a deployable Triton model repository, with the SageMaker and autoscaling
    request bodies sized for the target load and a README saying how to use them; and/or every candidate to MLflow.

    The candidates are ranked as `recommender rank` ranks them: under the experiment file's limits, or the ones given
    here (re-decided from the stored windows, nothing measured)."""
    if out is None and mlflow is None:
        raise UsageError("nothing to export to", hint="give --out FOLDER (the deliverable), --mlflow URI, or both")
    store = ResultStore.open(db, existing=True)
    rec, spec, results = recommend_from_store(
        store,
        experiment,
        endpoint_name=endpoint_name,
        threshold_ms=threshold_ms,
        percentile=percentile.value if percentile else None,
        max_error_rate=max_error_rate,
    )
    console = Console()
    deliverable = None
    if out is not None and format_ is ExportFormat.AIPERF:
        picked = chosen(rec, position)
        run_id = next(r.run_id for r in results if r.key == picked.candidate.key)
        levels = stored_levels(store, spec, run_id)
        claim_folder(out, force)
        console.print(
            f"[green]ok[/] {picked.candidate.name} (rank {picked.rank}): one AIPerf folder per level and repeat "
            f"(warm-up left out), by load, in {out}",
            highlight=False,
        )
        for number, level in enumerate(levels, start=1):
            folder = out / _folder_name(number, level)
            endpoint_type = aiperf_endpoint_type(spec.target.protocol, level.records.generative)
            write_aiperf(
                folder,
                level.records,
                level.started_at,
                picked.candidate.name,
                # the target's own URL (remote), else where the run sent its requests (a local server's port)
                spec.target.endpoint or (aiperf_url(level.sent_to, endpoint_type) if level.sent_to else None),
                level.load,
                endpoint_type,
            )
            console.print(
                f"  {folder.name}: {level.load.label}, repeat {level.repeat}: {len(level.records)} requests",
                highlight=False,
            )
    elif out is not None:
        options = ExportOptions(
            out_dir=out, position=position, cache_dir=cache_dir, image=image, endpoint_name=endpoint_name, force=force
        )
        deliverable = write_deliverable(rec, spec, options, results)  # served by the backend that was measured
        _said(console, deliverable)
    if mlflow is not None:
        extra = {deliverable.ranked.candidate.key: _files(deliverable)} if deliverable is not None else {}
        exported = export_experiment(mlflow, rec, results, store.window_records, extra)
        for run in exported:
            console.print(f"  mlflow {'created' if run.created else 'updated'} {run.name}: run {run.run_id}")
        console.print(
            f"[green]ok[/] {len(exported)} candidates exported to MLflow at {redact(mlflow)}", highlight=False
        )


def _folder_name(number: int, level: StoredLevel) -> str:
    """`01-concurrency-2-repeat-1`, `02-rate-12.5-repeat-1`: numbered in load order, so a listing is in that order."""
    return f"{number:02d}-{level.load.kind}-{level.load.value:g}-repeat-{level.repeat}"


def _files(deliverable: Deliverable) -> dict[str, bytes]:
    """The deliverable's files under `deliverable/` in the run's artifacts."""
    root = deliverable.out_dir
    return {
        f"deliverable/{path.relative_to(root).as_posix()}": path.read_bytes()
        for path in sorted(root.rglob("*"))
        if path.is_file()
    }


def _said(console: Console, deliverable: Deliverable) -> None:
    out = deliverable.out_dir
    console.print(
        f"[green]ok[/] {deliverable.ranked.candidate.name} (rank {deliverable.ranked.rank}) exported to {out}: "
        f"{deliverable.fleet_size} x {deliverable.instance_type}, autoscaling "
        f"{deliverable.scaling.min_capacity}-{deliverable.scaling.max_capacity}",
        highlight=False,
    )
    for path in [deliverable.repository, *deliverable.files]:
        if path is None:  # a generative (vLLM, llama.cpp) deliverable has no Triton repository
            continue
        console.print(f"  {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
