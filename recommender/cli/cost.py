"""`recommender cost`: instances and cost for a target load from a MaxInvocations figure, without a benchmark."""

from __future__ import annotations

import json

import typer
from rich.console import Console
from rich.table import Table

from recommender.cli import options
from recommender.decide.cost import CapacityPlan, plan_capacity
from recommender.decide.prices import find_price


def cost(
    ipm: float = typer.Option(..., "--ipm", help="Measured MaxInvocations per instance (invocations per minute)."),
    instance_type: str = typer.Option(..., "--instance-type", help="SageMaker instance type, e.g. ml.g4dn.xlarge."),
    target_ipm: float = typer.Option(..., "--target-ipm", help="Peak load to serve, invocations per minute."),
    region: str = typer.Option("us-east-1", "--region", help="Region whose price to use."),
    price: float | None = typer.Option(None, "--price", help="USD per instance-hour; overrides the catalog."),
    as_json: bool = options.JSON,
) -> None:
    """How many instances serve TARGET_IPM, and what they cost per hour, per inference and per million."""
    source = "--price"
    if price is None:
        entry, catalog = find_price(instance_type, region)
        price, source = entry.usd_per_hour, f"{catalog.path} (retrieved {catalog.retrieved})"
    plan = plan_capacity(instance_type, price, ipm, target_ipm)
    if as_json:
        typer.echo(json.dumps({**plan.to_dict(), "region": region, "price_source": source}, indent=2))
    else:
        Console().print(_plan_table(plan, region, source))


def _plan_table(plan: CapacityPlan, region: str, source: str) -> Table:
    table = Table(title=f"Capacity plan: {plan.instance_type} in {region}", show_header=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    rows = [
        ("price per instance-hour", f"{plan.price_per_hour:g} USD"),
        ("price source", source),
        ("MaxInvocations per instance", f"{plan.ipm_per_instance:g} /min"),
        ("target load", f"{plan.target_ipm:g} /min"),
        ("instance count", str(plan.fleet_size)),
        ("cost per hour", f"{plan.cost_per_hour:.4f} USD"),
        ("cost per inference", f"{plan.cost_per_inference:.4e} USD"),
        ("cost per million inferences", f"{plan.cost_per_million:.4f} USD"),
        ("utilisation at target", f"{plan.utilisation_at_target:.1%}"),
    ]
    for label, value in rows:
        table.add_row(label, value)
    return table


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)
