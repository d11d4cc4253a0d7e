"""`recommender rank EXPERIMENT`: the stored candidates ranked (constraints, weighted objectives, Pareto front,
ties)."""

from __future__ import annotations

import json

import typer
from rich.console import Console

from recommender.cli import options
from recommender.cli.tables import print_decision
from recommender.review import recommend_from_store
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
    rec, _, results = recommend_from_store(
        ResultStore.open(db, existing=True),
        experiment,
        threshold_ms=threshold_ms,
        percentile=percentile.value if percentile else None,
        max_error_rate=max_error_rate,
    )
    if as_json:
        typer.echo(json.dumps(rec.to_document(), indent=2))
        return
    print_decision(Console(), rec, results)


def register(app: typer.Typer) -> None:
    app.command("rank")(rank_command)
