"""`recommender validate FILE` and `recommender schema`."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console

from recommender.candidates import expand_candidates
from recommender.spec import json_schema, load_spec


def validate(file: Path = typer.Argument(..., help="Experiment YAML file to check.")) -> None:
    """Check an experiment file. Exit 0 when valid; exit 2 with `file: field.path: message` lines when not."""
    spec = load_spec(file)
    count = len(expand_candidates(spec))
    Console().print(f"[green]ok[/] {file}: experiment [bold]{spec.name}[/], {count} candidates", highlight=False)


def schema() -> None:
    """Print the JSON Schema of experiment files (for editor completion and validation)."""
    typer.echo(json.dumps(json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command()(validate)
    app.command()(schema)
