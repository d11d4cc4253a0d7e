"""`recommender cost` (capacity and cost for a target load) and `recommender prices show|refresh`."""

from __future__ import annotations

import json
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

from recommender.decide.cost import CapacityPlan, plan_capacity
from recommender.decide.prices import find_price, load_catalog, refresh_prices

PRICING_API_REGION = "us-east-1"  # the Price List API answers in us-east-1 for every priced region


def cost(
    ipm: float = typer.Option(..., "--ipm", help="Measured MaxInvocations per instance (invocations per minute)."),
    instance_type: str = typer.Option(..., "--instance-type", help="SageMaker instance type, e.g. ml.g4dn.xlarge."),
    target_ipm: float = typer.Option(..., "--target-ipm", help="Peak load to serve, invocations per minute."),
    region: str = typer.Option("us-east-1", "--region", help="Region whose price to use."),
    price: Optional[float] = typer.Option(None, "--price", help="USD per instance-hour; overrides the catalog."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
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


prices_app = typer.Typer(help="Show or refresh the SageMaker hosting price catalog.", no_args_is_help=True)


@prices_app.command("show")
def show_prices() -> None:
    """Print the catalog in use: region, source, retrieval date, and each type's price and hardware."""
    catalog = load_catalog()
    table = Table(title=f"SageMaker real-time hosting, on-demand, {catalog.region} ({catalog.currency}/hour)")
    for column in ("instance type", "USD/hour", "vCPUs", "memory GiB", "GPUs", "GPU memory GiB", "accelerator"):
        table.add_column(column, justify="left" if column in ("instance type", "accelerator") else "right",
                         no_wrap=column == "instance type")
    for name, item in sorted(catalog.instances.items(), key=lambda kv: (kv[1].usd_per_hour, kv[0])):
        table.add_row(name, f"{item.usd_per_hour:g}", *(_cell(v) for v in
                      (item.vcpus, item.memory_gib, item.gpus, item.gpu_memory_gib, item.accelerator)))
    console = Console()
    console.print(table)
    console.print(f"source: {catalog.source}", highlight=False, soft_wrap=True)
    console.print(f"retrieved: {catalog.retrieved}   file: {catalog.path}", highlight=False)


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


@prices_app.command("refresh")
def refresh(
    region: str = typer.Option("us-east-1", "--region", help="Region to read prices for."),
    instance_type: Optional[list[str]] = typer.Option(None, "--instance-type", help="Only these types (repeatable)."),
) -> None:
    """Read current prices from the AWS Price List API into .recommender/prices.yaml (needs AWS credentials)."""
    import boto3  # only this command needs it

    client = boto3.client("pricing", region_name=PRICING_API_REGION)
    catalog = refresh_prices(client, region, instance_type or None)
    Console().print(f"[green]ok[/] {len(catalog.instances)} {region} prices written to {catalog.path} "
                    f"(retrieved {catalog.retrieved})", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("cost")(cost)
    app.add_typer(prices_app, name="prices")
