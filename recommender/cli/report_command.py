"""`recommender rank`, `recommender report` and `recommender export`: an experiment's stored results turned into a
ranked table, a cost report (md, html, csv) and a deployable export of the chosen configuration."""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recommender.deliverable import ExportOptions, write_deliverable
from recommender.decide.recommendation import Recommendation
from recommender.review import recommend_from_store
from recommender.report import RENDERERS, build_report
from recommender.store.results import ResultStore

DB_HELP = "Results database URL (default: sqlite file .recommender/results.db; env RECOMMENDER_DB_URL)."


class Format(str, Enum):
    md = "md"
    html = "html"
    csv = "csv"


def rank_command(
    experiment: str = typer.Argument(..., help="Experiment name (as in its file's `name:`)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    as_json: bool = typer.Option(False, "--json", help="Print the ranking as JSON instead of a table."),
) -> None:
    """Rank the experiment's candidates: constraints first, then the weighted objectives, with the Pareto front,
    noise-level ties and the reasons every excluded candidate is out."""
    rec, _, _ = recommend_from_store(ResultStore.open(db), experiment)
    if as_json:
        typer.echo(json.dumps(rec.to_document(), indent=2))
        return
    console = Console()
    console.print(ranking_table(rec))
    console.print(rec.justification, highlight=False, markup=False, soft_wrap=True)
    for line in ([rec.tie_notice] if rec.tie_notice else []) + list(rec.notes):
        console.print(f"note: {line}", style="yellow", highlight=False, markup=False, soft_wrap=True)


def ranking_table(rec: Recommendation) -> Table:
    percentile = rec.percentile
    table = Table(title=f"{rec.experiment}: ranked within {percentile} <= {rec.threshold_ms:g} ms, "
                        f"error rate <= {rec.max_error_rate:.2%}", title_justify="left")
    for column in ("rank", "configuration", "score", "invocations/min", f"{percentile} ms", "cost per million",
                   "pareto", "tied", "excluded reasons"):
        table.add_column(column, justify="left" if column in ("configuration", "excluded reasons") else "right")
    for r in rec.ranking.ranked:
        c = r.candidate
        cost = "unpriced" if r.cost_per_million is None else f"{r.cost_per_million:,.4f} USD"
        table.add_row(str(r.rank), Text(c.name), f"{r.score:.3f}", f"{c.invocations_per_minute:,.0f}", f"{c.latency_ms:,.1f}",
                      cost, "yes" if r.pareto else "", "yes" if r.tied_with_winner else "", "")
    for e in rec.ranking.excluded:
        c = e.candidate
        ipm = f"{c.invocations_per_minute:,.0f}" if c.invocations_per_minute else "-"
        latency = f"{c.latency_ms:,.1f}" if c.latency_ms is not None else "-"
        table.add_row("-", Text(c.name), "-", ipm, latency, "-", "", "", Text("; ".join(e.reasons)))  # never markup
    return table


def report_command(
    experiment: str = typer.Argument(..., help="Experiment name."),
    format_: Format = typer.Option(Format.md, "--format", help="md (Markdown), html (one self-contained file) or csv."),
    out: Optional[Path] = typer.Option(None, "--out", help="Write to this file; stdout when left out."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
) -> None:
    """A cost report for a deployment decision: the recommendation in plain words, every configuration with the
    published study's columns, the excluded candidates with their reasons (HTML adds the charts)."""
    rec, _, _ = recommend_from_store(ResultStore.open(db), experiment)
    text = RENDERERS[format_.value](build_report(rec))
    if out is None:
        typer.echo(text, nl=False)
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    Console(stderr=True).print(f"[green]ok[/] {format_.value} report written to {out}", highlight=False)


def export_command(
    experiment: str = typer.Argument(..., help="Experiment name."),
    out: Path = typer.Option(..., "--out", help="Folder to write the export into (new or empty)."),
    position: int = typer.Option(1, "--rank", min=1, help="Which ranked candidate to export (1 = the recommendation)."),
    db: str = typer.Option(None, "--db", help=DB_HELP),
    image: Optional[str] = typer.Option(None, "--image", help="Serving image URI for create_model.json (else a placeholder)."),
    endpoint_name: Optional[str] = typer.Option(None, "--endpoint-name", help="SageMaker endpoint name (default: experiment-configuration)."),
    cache_dir: Path = typer.Option(Path(".recommender") / "artifacts", "--cache-dir", help="Model export cache (shared with `run`)."),
) -> None:
    """Export a ranked configuration as a deployable Triton model repository, with the SageMaker and autoscaling
    request bodies sized for the target load and a README saying how to use them."""
    rec, spec, _ = recommend_from_store(ResultStore.open(db), experiment, endpoint_name=endpoint_name)
    options = ExportOptions(out_dir=out, position=position, cache_dir=cache_dir, image=image, endpoint_name=endpoint_name)
    deliverable = write_deliverable(rec, spec, options)
    console = Console()
    console.print(f"[green]ok[/] {deliverable.ranked.candidate.name} (rank {deliverable.ranked.rank}) exported to {out}: "
                  f"{deliverable.fleet_size} x {deliverable.instance_type}, autoscaling "
                  f"{deliverable.scaling.min_capacity}-{deliverable.scaling.max_capacity}", highlight=False)
    for path in (deliverable.repository, *deliverable.files):
        console.print(f"  {path}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("rank")(rank_command)
    app.command("report")(report_command)
    app.command("export")(export_command)
