"""Options shared by several commands, defined once so their names, defaults and help read the same everywhere."""

from __future__ import annotations

import typer

from recommender import paths

DB = typer.Option(None, "--db", help=f"Results database URL, e.g. postgresql+psycopg://user@host/db "
                  f"(default: the SQLite file {paths.RESULTS_DB}; or set RECOMMENDER_DB_URL).")
JSON = typer.Option(False, "--json", help="Print JSON for programs instead of a table.")
EXPERIMENT = typer.Argument(..., help="Experiment name (the `name:` of its file); `recommender run` stores it.")
SPEC_FILE = typer.Argument(..., help="Experiment YAML file, e.g. experiments/quickstart.yaml.")
