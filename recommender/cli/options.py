"""Options shared by several commands, defined once so their names, defaults and help read the same everywhere."""

from __future__ import annotations

from enum import StrEnum

import typer

from recommender.files import paths

DB = typer.Option(
    None,
    "--db",
    help=f"Results database URL, e.g. postgresql+psycopg://user@host/db "
    f"(default: the SQLite file {paths.RESULTS_DB}; or set RECOMMENDER_DB_URL).",
)
JSON = typer.Option(False, "--json", help="Print JSON for programs instead of a table.")
EXPERIMENT = typer.Argument(..., help="Experiment name (the `name:` of its file); `recommender run` stores it.")
# readable=False: the experiment loader checks the file itself (one message and hint for every way it can be wrong)
SPEC_FILE = typer.Argument(..., readable=False, help="Experiment YAML file, e.g. experiments/quickstart.yaml.")
FORCE = typer.Option(False, "--force", help="Write over an existing --out file (or into a non-empty --out folder).")
THRESHOLD_MS = typer.Option(
    None,
    "--latency-threshold-ms",
    min=0.001,
    help="Decide under this latency threshold "
    "(ms) instead of the experiment file's; re-decided from the stored windows, nothing measured.",
)


class PercentileChoice(StrEnum):
    """--percentile's choices: vocabulary.PERCENTILE_NAMES (spelled out for type checkers; a unit test keeps them
    equal)."""

    p50 = "p50"
    p90 = "p90"
    p95 = "p95"
    p99 = "p99"


PERCENTILE = typer.Option(
    None, "--percentile", help="Decide on this latency percentile instead of the experiment file's."
)
MAX_ERROR_RATE = typer.Option(
    None,
    "--max-error-rate",
    min=0.0,
    max=1.0,
    help="Decide under this largest error rate (0.02 = 2 %) instead of the experiment file's.",
)
