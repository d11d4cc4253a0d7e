"""Options shared by several commands, defined once so their names, defaults and help read the same everywhere."""

from __future__ import annotations

import typer

from recommender import paths

DB = typer.Option(None, "--db", help=f"Results database URL, e.g. postgresql+psycopg://user@host/db "
                  f"(default: the SQLite file {paths.RESULTS_DB}; or set RECOMMENDER_DB_URL).")
JSON = typer.Option(False, "--json", help="Print JSON for programs instead of a table.")
EXPERIMENT = typer.Argument(..., help="Experiment name (the `name:` of its file); `recommender run` stores it.")
# readable=False: the experiment loader checks the file itself (one message and hint for every way it can be wrong)
SPEC_FILE = typer.Argument(..., readable=False, help="Experiment YAML file, e.g. experiments/quickstart.yaml.")
FORCE = typer.Option(False, "--force", help="Write over an existing --out file (or into a non-empty --out folder).")
