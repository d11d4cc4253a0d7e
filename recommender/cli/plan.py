"""`recommender plan SPEC`: the candidates, how long they take and what they cost, before anything starts."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from recommender.decide.budget import check_budget, estimate_plan
from recommender.cli import options
from recommender.load.shapes import traffic_seconds
from recommender.modelrepo.model_source import describe
from recommender.candidates import expand_candidates
from recommender.spec import ExperimentSpec, load_spec


def plan(
    spec_file: Path = options.SPEC_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Print the candidates, the estimated duration and the estimated cloud cost against target.budget_usd.

    Exits 1 when the estimate is above the budget (a run would refuse to start).
    """
    spec = load_spec(spec_file)
    candidates = expand_candidates(spec)
    estimate = estimate_plan(spec, len(candidates))
    budget = spec.target.budget_usd
    over = estimate.usd > budget if budget is not None else False
    if as_json:
        typer.echo(json.dumps({"candidates": estimate.candidates, "minutes": estimate.minutes_per_candidate * estimate.candidates,
                               "instance_hours": estimate.instance_hours, "price_per_hour": estimate.price_per_hour,
                               "estimated_usd": estimate.usd, "budget_usd": budget, "within_budget": not over}, indent=2))
    else:
        console = Console()
        console.print(plan_table(spec))
        console.print(f"estimated duration: {estimate.minutes_per_candidate * estimate.candidates:.0f} min "
                      f"({estimate.candidates} x {estimate.minutes_per_candidate:.1f} min, deploy and teardown included)", highlight=False)
        console.print(f"estimated cost: ${estimate.usd:.2f} ({estimate.instance_hours:.2f} instance-hours of "
                      f"{spec.target.instance_type} x {estimate.endpoint_instance_count} at ${estimate.price_per_hour:.4f}/h)"
                      + (f"; budget ${budget:.2f}" if budget is not None else "; no budget set"), highlight=False)
    check_budget(estimate, budget)  # exit 1 with the budget message when a run would refuse to start


def plan_table(spec: ExperimentSpec) -> Table:
    load_s = traffic_seconds(spec.traffic)
    candidates = expand_candidates(spec)
    table = Table(title=f"{spec.name}: {len(candidates)} candidates, {load_s:g} s of traffic each "
                        f"(about {len(candidates) * (load_s + 30) / 60:.0f} min with start-up)", title_justify="left")
    for column in ("configuration", "key", "optimization", "dynamic batching", "instances", "max batch", "instance type"):
        table.add_column(column)
    for c in candidates:
        db = c.dynamic_batching
        batching = (f"on, delay {db.max_queue_delay_microseconds} us, preferred {db.preferred_batch_size}" if db else "off")
        table.add_row(c.name, c.key, c.optimization, batching, str(c.instance_group_count), str(c.max_batch_size), c.instance_type)
    table.caption = describe(spec.model)
    return table


def register(app: typer.Typer) -> None:
    app.command()(plan)
