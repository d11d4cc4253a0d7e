"""`recommender cleanup`: delete SageMaker endpoints, endpoint configs and models a run left behind (found by tag)."""

from __future__ import annotations

import re
from datetime import timedelta

import typer
from rich.console import Console

from recommender.errors import UsageError
from recommender.targets.aws import AwsClients
from recommender.targets.sagemaker import cleanup as delete_tagged

_DURATION = re.compile(r"^(?P<amount>\d+(?:\.\d+)?)(?P<unit>[smhd])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str) -> timedelta:
    """'90s', '30m', '2h', '1.5d' -> timedelta."""
    match = _DURATION.match(text.strip())
    if not match:
        raise UsageError(f"--older-than {text!r} is not a duration", hint="Use a number and a unit: 90s, 30m, 2h, 1d.")
    return timedelta(seconds=float(match["amount"]) * _SECONDS[match["unit"]])


def cleanup(
    older_than: str = typer.Option(None, "--older-than", help="Only resources created longer ago than this (30m, 2h, 1d)."),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
    run_id: str = typer.Option(None, "--run-id", help="Only this run's resources (the recommender:run-id tag)."),
    region: str = typer.Option("us-east-1", "--region", help="AWS region."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="AWS API URL override (an emulator)."),
) -> None:
    """Delete SageMaker endpoints, endpoint configs and models tagged recommender:run-id. Untagged resources are never
    touched, and a scope is required: --older-than (any run's leftovers of that age), --run-id (one run's), or both."""
    if older_than is None and run_id is None:
        raise UsageError("cleanup needs --older-than or --run-id: it never deletes every tagged resource at once",
                         hint="e.g. `recommender cleanup --older-than 2h --dry-run` (a run in progress is younger), "
                              "or --run-id with the id a run printed (the recommender:run-id tag).")
    age = parse_duration(older_than) if older_than is not None else None
    report = delete_tagged(AwsClients(region, endpoint_url=endpoint_url), older_than=age, dry_run=dry_run, run_id=run_id)
    console, verb = Console(), "would delete" if dry_run else "deleted"
    for kind, names in (("endpoint", report.endpoints), ("endpoint config", report.endpoint_configs), ("model", report.models)):
        for name in names:
            console.print(f"{verb} {kind} {name}", highlight=False)
    console.print(f"{report.total} resource(s) {verb}" if report.total else "nothing to clean up", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(cleanup)
