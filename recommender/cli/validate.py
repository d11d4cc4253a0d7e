"""`recommender validate FILE`: check an experiment file without running anything."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.cli.plan import summary
from recommender.spec import load_spec


def validate(file: Path = options.SPEC_FILE) -> None:
    """Check an experiment file. Exit 0 when valid; exit 2 with `file: field.path: message` lines when not."""
    spec = load_spec(file)
    Console().print(f"[green]ok[/] {file}: experiment [bold]{spec.name}[/], {summary(spec)}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(validate)
