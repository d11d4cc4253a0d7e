"""`recommender prices show|refresh`: the SageMaker hosting price catalog in use, and refreshing it from AWS."""

from __future__ import annotations

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from recommender.decide.prices import load_catalog, refresh_prices

PRICING_API_REGION = "us-east-1"  # the Price List API answers in us-east-1 for every priced region

prices_app = typer.Typer(help="Show or refresh the SageMaker hosting price catalog.", no_args_is_help=True)


@prices_app.command("show")
def show_prices() -> None:
    """Print the catalog in use: region, source, retrieval date, and each type's price and hardware."""
    catalog = load_catalog()
    table = Table(title=Text(f"SageMaker real-time hosting, on-demand, {catalog.region} ({catalog.currency}/hour)"))
    for column in ("instance type", "USD/hour", "vCPUs", "memory GiB", "GPUs", "GPU memory GiB", "accelerator"):
        table.add_column(
            column,
            justify="left" if column in ("instance type", "accelerator") else "right",
            no_wrap=column == "instance type",
        )
    for name, item in sorted(catalog.instances.items(), key=lambda kv: (kv[1].usd_per_hour, kv[0])):
        table.add_row(  # the names and figures come from the catalog file: text, not Rich markup
            Text(name),
            f"{item.usd_per_hour:g}",
            *(Text(_cell(v)) for v in (item.vcpus, item.memory_gib, item.gpus, item.gpu_memory_gib, item.accelerator)),
        )
    console = Console()
    console.print(table)
    console.print(f"source: {catalog.source}", highlight=False, soft_wrap=True, markup=False)
    console.print(f"retrieved: {catalog.retrieved}   file: {catalog.path}", highlight=False, markup=False)


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


@prices_app.command("refresh")
def refresh(
    region: str = typer.Option("us-east-1", "--region", help="Region to read prices for."),
    instance_type: list[str] | None = typer.Option(None, "--instance-type", help="Only these types (repeatable)."),
) -> None:
    """Read current prices from the AWS Price List API into .recommender/prices.yaml (needs AWS credentials)."""
    import boto3  # only this command needs it

    client = boto3.client("pricing", region_name=PRICING_API_REGION)
    catalog = refresh_prices(client, region, instance_type or None)
    Console().print(
        f"[green]ok[/] {len(catalog.instances)} {region} prices written to {catalog.path} "
        f"(retrieved {catalog.retrieved})",
        highlight=False,
    )


def register(app: typer.Typer) -> None:
    app.add_typer(prices_app, name="prices")
