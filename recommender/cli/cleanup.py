"""`recommender cleanup`: remove the docker containers (by label) and delete the SageMaker endpoints, endpoint configs,
models and S3 model archives (by tag) a run left behind."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import typer
from rich.console import Console

from recommender.errors import TargetError, UsageError
from recommender.targets.archives import delete_archives, find_archives
from recommender.targets.aws import AwsClients
from recommender.targets.docker import labelled_containers, remove_containers
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
    older_than: str = typer.Option(
        None, "--older-than", help="Only resources created longer ago than this (30m, 2h, 1d)."
    ),
    dry_run: bool = typer.Option(False, "--dry-run", help="List what would be deleted; delete nothing."),
    run_id: str = typer.Option(None, "--run-id", help="Only this run's resources (the recommender:run-id tag)."),
    region: str = typer.Option("us-east-1", "--region", help="AWS region."),
    endpoint_url: str = typer.Option(None, "--endpoint-url", help="AWS API URL override (an emulator)."),
    bucket: str = typer.Option(
        None,
        "--bucket",
        help="The sagemaker target's S3 bucket: its model archives are cleaned up too (without it, S3 is not checked).",
    ),
    s3_prefix: str = typer.Option("recommender", "--s3-prefix", help="The sagemaker target's s3_prefix."),
) -> None:
    """Remove docker containers labelled recommender.run-id (when a docker CLI is installed), then delete SageMaker
    endpoints, endpoint configs and models tagged recommender:run-id, and (with --bucket) the model archives under
    --s3-prefix tagged so. Unlabelled or untagged ones are never touched, and a scope is required: --older-than
    (any run's leftovers of that age), --run-id (one run's), or both."""
    if older_than is None and run_id is None:
        raise UsageError(
            "cleanup needs --older-than or --run-id: it never deletes every tagged resource at once",
            hint="e.g. `recommender cleanup --older-than 2h --dry-run` (a run in progress is younger), "
            "or --run-id with the id a run printed (the recommender:run-id tag).",
        )
    age = parse_duration(older_than) if older_than is not None else None
    console, verb = Console(), "would delete" if dry_run else "deleted"
    containers = _remove_containers(console, run_id, age, dry_run)
    for name in containers:
        console.print(f"{verb} container {name}", highlight=False)
    clients = AwsClients(region, endpoint_url=endpoint_url)
    report = delete_tagged(clients, older_than=age, dry_run=dry_run, run_id=run_id)
    archives = _remove_archives(console, clients, bucket, s3_prefix, run_id, age, dry_run)
    for kind, names in (
        ("endpoint", report.endpoints),
        ("endpoint config", report.endpoint_configs),
        ("model", report.models),
        ("S3 object", [f"s3://{bucket}/{key}" for key in archives]),
    ):
        for name in names:
            console.print(f"{verb} {kind} {name}", highlight=False)
    total = report.total + len(containers) + len(archives)
    console.print(f"{total} resource(s) {verb}" if total else "nothing to clean up", highlight=False)


def _remove_containers(console: Console, run_id: str | None, age: timedelta | None, dry_run: bool) -> list[str]:
    """The run's labelled containers, removed unless dry_run; none where there is no docker CLI or engine (said)."""
    if shutil.which("docker") is None:
        return []
    try:
        names = labelled_containers(run_id, age)
    except TargetError as error:
        console.print(f"[yellow]containers not checked[/]: {error.message}", highlight=False, soft_wrap=True)
        return []
    if not dry_run:
        remove_containers(names)
    return names


def _remove_archives(
    console: Console,
    clients: AwsClients,
    bucket: str | None,
    prefix: str,
    run_id: str | None,
    age: timedelta | None,
    dry_run: bool,
) -> list[str]:
    """The run's tagged model archives in S3, deleted unless dry_run; none without --bucket (said)."""
    if bucket is None:
        console.print("S3 model archives not checked: pass --bucket (the sagemaker target's bucket)", highlight=False)
        return []
    keys = find_archives(clients, bucket, prefix, run_id=run_id, older_than=age)
    if not dry_run:
        delete_archives(clients, bucket, keys)
    return keys


def register(app: typer.Typer) -> None:
    app.command()(cleanup)
