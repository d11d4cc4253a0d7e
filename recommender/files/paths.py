"""Where recommender keeps its working files: one `.recommender/` folder in the working directory.

    .recommender/results.db    the default SQLite results database (any SQL database by URL instead)
    .recommender/runs/         per run and candidate: server log, model repository, load records
    .recommender/artifacts/    model exports, cached by content (shared by `run` and `export`)
    .recommender/prices.yaml   a price catalog refreshed from the AWS Price List API (`prices refresh`)

Relative paths: they resolve against the directory the command runs in.
"""

from __future__ import annotations

from pathlib import Path

HOME = Path(".recommender")
RESULTS_DB = HOME / "results.db"
RUNS = HOME / "runs"
ARTIFACTS = HOME / "artifacts"
REFRESHED_PRICES = HOME / "prices.yaml"
