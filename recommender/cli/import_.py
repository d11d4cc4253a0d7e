"""`recommender import sagemaker-job JOB.json`: an experiment file from a SageMaker Inference Recommender job
request."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.importers.sagemaker_job import experiment_path, import_job, read_job, write_experiment

import_app = typer.Typer(help="Turn other tools' job definitions into experiment files.", no_args_is_help=True)


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
    console.print(f"wrote {path}", highlight=False)
    for note in imported.notes:
        console.print(f"[yellow]note:[/] {note}", highlight=False)
    if not imported.notes:
        console.print("everything in the job was mapped", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(import_app, name="import")
