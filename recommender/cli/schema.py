"""`recommender schema`: the JSON Schema of experiment files (for editor completion and validation)."""

from __future__ import annotations

import json

import typer

from recommender.spec import json_schema


def schema() -> None:
    """Print the JSON Schema of experiment files (for editor completion and validation)."""
    typer.echo(json.dumps(json_schema(), indent=2))


def register(app: typer.Typer) -> None:
    app.command()(schema)
