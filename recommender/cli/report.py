"""`recommender report EXPERIMENT`: the cost report for a deployment decision (Markdown, HTML or CSV)."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.files.destination import claim_file, write_text
from recommender.report import RENDERERS, build_report
from recommender.review import recommend_from_store
from recommender.store.results import ResultStore


class Format(StrEnum):
    md = "md"
    html = "html"
    csv = "csv"


def report_command(
    experiment: str = options.EXPERIMENT,
    format_: Format = typer.Option(Format.md, "--format", help="md (Markdown), html (one self-contained file) or csv."),
    out: Path | None = typer.Option(
        None, "--out", help="Write to this file (a new one, unless --force); stdout when left out."
    ),
    db: str = options.DB,
    force: bool = options.FORCE,
    threshold_ms: float = options.THRESHOLD_MS,
    percentile: options.PercentileChoice = options.PERCENTILE,
    max_error_rate: float = options.MAX_ERROR_RATE,
) -> None:
    """A cost report for a deployment decision: the recommendation in plain words, every configuration with the
    published study's columns, the excluded candidates with their reasons (HTML adds the charts)."""
    if out is not None:
        claim_file(out, force)  # before the report is built: a refusal costs nothing
    rec, _, _ = recommend_from_store(
        ResultStore.open(db, existing=True),
        experiment,
        threshold_ms=threshold_ms,
        percentile=percentile.value if percentile else None,
        max_error_rate=max_error_rate,
    )
    text = RENDERERS[format_.value](build_report(rec))
    if out is None:
        typer.echo(text, nl=False)
        return
    write_text(out, text, force)
    Console(stderr=True).print(f"[green]ok[/] {format_.value} report written to {out}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("report")(report_command)
