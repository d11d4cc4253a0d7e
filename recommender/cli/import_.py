"""`recommender import sagemaker-job JOB.json`: an experiment file from a SageMaker Inference Recommender job
request; `recommender import aiperf DIR`: an AIPerf run's records stored as a run (ranked, costed, reported here)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from recommender.cli import options
from recommender.files import paths
from recommender.importers.aiperf import read_aiperf
from recommender.importers.sagemaker_job import experiment_path, import_job, read_job, write_experiment
from recommender.job.imported_run import ImportOptions, store_aiperf
from recommender.store.results import ResultStore

import_app = typer.Typer(
    help="Turn other tools' job definitions into experiment files, and their measurements into stored runs.",
    no_args_is_help=True,
)


@import_app.command("sagemaker-job")
def sagemaker_job(
    job_file: Path = typer.Argument(
        ..., readable=False, help="CreateInferenceRecommendationsJob request JSON (as for --cli-input-json)."
    ),
    out: Path = typer.Option(
        None, "--out", help="Experiment file to write, or a folder for <JobName>.yaml (default: <JobName>.yaml here)."
    ),
    force: bool = options.FORCE,
) -> None:
    """Write the experiment file and print the notes on what could not be mapped (they are kept in its `notes:`)."""
    imported = import_job(read_job(job_file))
    path = write_experiment(imported, experiment_path(imported, out, force), force)
    console = Console()
    console.print(f"wrote {escape(str(path))}", highlight=False)
    for note in imported.notes:
        console.print(f"[yellow]note:[/] {escape(note)}", highlight=False)  # quotes the job: text, not markup
    if not imported.notes:
        console.print("everything in the job was mapped", highlight=False)


@import_app.command("aiperf")
def aiperf(
    folder: Path = typer.Argument(
        ...,
        file_okay=False,
        help="AIPerf artifact folder (--artifact-dir): profile_export.jsonl and profile_export_aiperf.json.",
    ),
    experiment: str | None = typer.Option(
        None, "--experiment", help="Experiment to store it as (default: aiperf-<folder name>)."
    ),
    instance_type: str = typer.Option(
        "local-cpu", "--instance-type", help="The hardware the measured endpoint ran on (a label, or a catalog type)."
    ),
    price_per_hour: float = typer.Option(
        0.0, "--price-per-hour", min=0, help="What one instance costs per hour in USD (0: unpriced, relative cost)."
    ),
    warmup_seconds: float = typer.Option(
        0.0,
        "--warmup-seconds",
        min=0,
        help="Seconds at the start left out of the windows (AIPerf's own warm-up requests are not in its records).",
    ),
    window_seconds: float | None = typer.Option(
        None,
        "--window-seconds",
        min=0.001,
        help="Steady-state window length (default: the run's duration in up to 10 windows of 40 requests or more).",
    ),
    db: str = options.DB,
    run_dir: Path = typer.Option(paths.RUNS, "--run-dir", help="Where the run's records are kept (load.npz)."),
) -> None:
    """Store an AIPerf run (a closed-loop `aiperf profile --concurrency N` run of an embeddings endpoint, or a streamed
    chat or completions one with its token-level records) as an experiment of one candidate, cut into windows and
    decided like a measured run; importing the same folder again stores nothing."""
    run = read_aiperf(folder)
    name = experiment or f"aiperf-{folder.resolve().name}"
    settings = ImportOptions(name, instance_type, price_per_hour, warmup_seconds, window_seconds, run_dir)
    imported = store_aiperf(ResultStore.open(db), run, folder, settings)
    console = Console()
    if imported.run_id is None:
        console.print(
            f"{escape(str(folder))} is stored already as {escape(imported.experiment)}; nothing stored", highlight=False
        )
        return
    console.print(  # the version and the names come from the user's files and options: text, not Rich markup
        f"[green]ok[/] {imported.requests} requests (AIPerf {escape(run.aiperf_version)}, {run.endpoint_type}, "
        f"concurrency {run.concurrency}) stored as experiment {escape(imported.experiment)} (protocol {run.protocol}), "
        f"run {imported.run_id}: "
        f"`recommender report {escape(imported.experiment)}`",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
