"""Where a load-generator child keeps its run: an attribute of Locust's Environment, which has no slot of its own
for it. The user classes (locustfile.py, sagemaker_user.py) read it back; neither imports the other."""

from __future__ import annotations

from typing import Any

ATTRIBUTE = "recommender_run"


def keep_run(environment: object, run: object) -> None:
    setattr(environment, ATTRIBUTE, run)


def run_of(environment: object) -> Any:
    """The run kept on `environment` (None where none was kept: a worker the master never sent settings)."""
    return getattr(environment, ATTRIBUTE, None)
