"""`recommender rank EXPERIMENT`: the stored candidates ranked (constraints, weighted objectives, Pareto front, ties)."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recommender.cli import options
from recommender.decide.recommendation import Recommendation
from recommender.review import Overrides, recommend_from_store
from recommender.store.results import ResultStore


def rank_command(
    experiment: str = options.EXPERIMENT,
    db: str = options.DB,
    as_json: bool = options.JSON,
    threshold_ms: float = options.THRESHOLD_MS,
    percentile: options.PercentileChoice = options.PERCENTILE,
    max_error_rate: float = options.MAX_ERROR_RATE,
) -> None:
    """Rank the experiment's candidates: constraints first, then the weighted objectives, with the Pareto front,
    noise-level ties and the reasons every excluded candidate is out.

    The limits default to the experiment file's; other ones re-decide the stored windows (nothing is measured)."""
    limits = Overrides(threshold_ms, percentile.value if percentile else None, max_error_rate)
    rec, _, _ = recommend_from_store(ResultStore.open(db), experiment, limits=limits)
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


def register(app: typer.Typer) -> None:
    app.command("rank")(rank_command)
