"""`recommender export EXPERIMENT --out DIR`: the chosen configuration as a deployable Triton repository."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.files import paths
from recommender.report.deliverable import ExportOptions, write_deliverable
from recommender.review import recommend_from_store
from recommender.store.results import ResultStore


def export_command(
    experiment: str = options.EXPERIMENT,
    out: Path = typer.Option(..., "--out", help="Folder to write the export into (new or empty, unless --force)."),
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
) -> None:
    """Export a ranked configuration as a deployable Triton model repository, with the SageMaker and autoscaling
    request bodies sized for the target load and a README saying how to use them."""
    rec, spec, results = recommend_from_store(ResultStore.open(db), experiment, endpoint_name=endpoint_name)
    options = ExportOptions(
        out_dir=out, position=position, cache_dir=cache_dir, image=image, endpoint_name=endpoint_name, force=force
    )
    deliverable = write_deliverable(rec, spec, options, results)  # served by the backend that was measured
    console = Console()
    console.print(
        f"[green]ok[/] {deliverable.ranked.candidate.name} (rank {deliverable.ranked.rank}) exported to {out}: "
        f"{deliverable.fleet_size} x {deliverable.instance_type}, autoscaling "
        f"{deliverable.scaling.min_capacity}-{deliverable.scaling.max_capacity}",
        highlight=False,
    )
    for path in (deliverable.repository, *deliverable.files):
        console.print(f"  {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("export")(export_command)
