"""`recommender validate FILE`: check an experiment file without running anything."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from recommender.cli import options
from recommender.cli.plan import summary
from recommender.load.prompts import check_prompts
from recommender.spec import load_spec


def validate(file: Path = options.SPEC_FILE) -> None:
    """Check an experiment file. Exit 0 when valid; exit 2 with `file: field.path: message` lines when not."""
    spec = load_spec(file)
    check_prompts(spec, file)
    said = f"{escape(str(file))}: experiment [bold]{escape(spec.name)}[/], {escape(summary(spec))}"  # the file's text
    Console().print(f"[green]ok[/] {said}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(validate)
