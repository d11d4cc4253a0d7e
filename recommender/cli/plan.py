"""`recommender plan SPEC`: the candidates, how long they take and what they cost, before anything starts.

Per target: its candidates, its price (price_per_hour, or the catalog price of priced_as / the SageMaker type) and
its cost; the traffic's duration (every shape, repeats included) comes from load/shapes.py `traffic_seconds`. The
wall-time estimate divides by the candidates that may run at once (schedule.py: max_parallel where the target allows).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from recommender.candidates import GENERATIVE_ENGINES, expand_candidates
from recommender.cli import options
from recommender.decide.budget import CostEstimate, check_budget, estimate_plan, experiment_budget, total_estimate
from recommender.job.refusals import planned_refusals
from recommender.job.schedule import slot_group, slots_for
from recommender.load.shapes import traffic_seconds
from recommender.modelrepo.model_source import describe
from recommender.search.plan import planned_counts, planned_total
from recommender.spec import DynamicBatching, ExperimentSpec, load_spec, target_label
from recommender.spec.search import IntRange


def plan(
    spec_file: Path = options.SPEC_FILE,
    as_json: bool = options.JSON,
) -> None:
    """Print the candidates, the estimated duration and the estimated cloud cost against the budget.

    Exits 1 when the estimate is above the budget (a run would refuse to start).
    """
    spec = load_spec(spec_file)
    candidates = expand_candidates(spec)
    refused = planned_refusals(spec, candidates)
    skipped = {c.name: refused[c.key] for c in candidates[: planned_total(spec, len(candidates))] if c.key in refused}
    per_target = target_estimates(spec, refused)
    estimate, minutes = total_estimate(per_target), wall_minutes(spec, per_target)
    budget = experiment_budget(spec)
    over = estimate.usd > budget if budget is not None else False
    if as_json:
        typer.echo(
            json.dumps(
                {
                    "search": spec.search.strategy,
                    "space": len(candidates),
                    "candidates": estimate.candidates,
                    "skipped": [{"name": name, "reason": reason} for name, reason in skipped.items()],
                    "minutes": minutes,
                    "instance_hours": estimate.instance_hours,
                    "price_per_hour": estimate.price_per_hour,
                    "estimated_usd": estimate.usd,
                    "budget_usd": budget,
                    "within_budget": not over,
                    "max_parallel": spec.max_parallel,
                    "targets": [_target_json(spec, i, e) for i, e in enumerate(per_target)],
                },
                indent=2,
            )
        )
    else:
        console = Console()
        console.print(plan_table(spec, refused))
        console.print(cost_table(spec, per_target))
        console.print(
            f"estimated duration: {minutes:.0f} min ({_count(estimate.candidates, skipped)}, deploy and teardown "
            f"included{_parallel_note(spec)}{_known_note(spec)})",
            highlight=False,
        )
        console.print(
            f"estimated cost: ${estimate.usd:.2f} ({estimate.instance_hours:.2f} instance-hours)"
            + (f"; budget ${budget:.2f}" if budget is not None else "; no budget set"),
            highlight=False,
        )
    check_budget(estimate, budget)  # exit 1 with the budget message when a run would refuse to start


def target_estimates(spec: ExperimentSpec, refused: Mapping[str, str] | None = None) -> list[CostEstimate]:
    """One estimate per target (spec.all_targets order) for the candidates it may run (search/plan.py: max_candidates
    applied; adaptive: the candidates it may probe, each counted as if measured in full, an upper bound); those the
    job skips before starting them (`refused`, by key: job/refusals.py) cost nothing and are not counted."""
    candidates = expand_candidates(spec)
    counts = planned_counts(spec, candidates, refused if refused is not None else planned_refusals(spec, candidates))
    return [estimate_plan(spec, counts[i], target) for i, target in enumerate(spec.all_targets)]


def wall_minutes(spec: ExperimentSpec, per_target: list[CostEstimate]) -> float:
    """Wall time: each group's candidates (schedule.py: local targets share this host) in rounds of the slots it
    offers (GPUs of this host not counted: CPU slots), the groups side by side up to max_parallel; capped by
    time_budget_seconds."""
    minutes_by_group: dict[str, float] = defaultdict(float)
    for index, (e, t) in enumerate(zip(per_target, spec.all_targets, strict=False)):
        slots = len(slots_for(t.kind, (), spec.max_parallel))
        minutes_by_group[slot_group(t, index)] += math.ceil(e.candidates / slots) * e.minutes_per_candidate
    serial = sum(e.candidates * e.minutes_per_candidate for e in per_target)
    minutes = (
        serial
        if spec.max_parallel == 1
        else max(max(minutes_by_group.values(), default=0.0), serial / spec.max_parallel)
    )
    limits = [
        spec.time_budget_seconds / 60 if spec.time_budget_seconds is not None else None,
        spec.search.budget.minutes if spec.search.adaptive else None,
    ]
    return min([minutes, *(limit for limit in limits if limit is not None)])


def _count(to_run: int, skipped: Mapping[str, str]) -> str:
    """`3 to run, 1 skipped (vllm-seqs4096: vLLM 0.32.0 refuses it: ...)`; `3 candidates` when none is skipped."""
    if not skipped:
        return f"{to_run} candidates"
    why = "; ".join(f"{name}: {reason}" for name, reason in skipped.items())
    return f"{to_run} to run, {len(skipped)} skipped before any server starts ({why})"


def _parallel_note(spec: ExperimentSpec) -> str:
    if spec.search.adaptive:
        return (
            ", one at a time; adaptive search: an upper bound, each as if measured in full "
            "(pruned ones stop after their probe)"
        )
    if spec.max_parallel == 1:
        return ", one at a time"
    return f", up to {spec.max_parallel} at once where the target allows (local CPU: one at a time)"


def _known_note(spec: ExperimentSpec) -> str:
    """Measured until known, every level's planned duration is the most it takes: the estimate is an upper bound."""
    known = spec.traffic.known
    if known is None:
        return ""
    below = "; from the top, the levels below the first that meets the limits are not run" if known.from_top else ""
    return f"; measured until known: at most this, each level ends once known{below}"


def _target_json(spec: ExperimentSpec, index: int, estimate: CostEstimate) -> dict:
    target = spec.all_targets[index]
    return {
        "target": target_label(target),
        "kind": target.kind,
        "instance_type": target.instance_type,
        "candidates": estimate.candidates,
        "price_per_hour": estimate.price_per_hour,
        "estimated_usd": estimate.usd,
        "minutes_per_candidate": estimate.minutes_per_candidate,
    }


def cost_table(spec: ExperimentSpec, per_target: list[CostEstimate]) -> Table:
    table = Table(title="cost per target", title_justify="left")
    for column in ("target", "kind", "instance type", "candidates", "min each", "instances", "price/h", "cost"):
        table.add_column(column)
    for target, e in zip(spec.all_targets, per_target, strict=False):
        table.add_row(
            target_label(target),
            target.kind,
            target.instance_type,
            str(e.candidates),
            f"{e.minutes_per_candidate:.1f}",
            str(e.endpoint_instance_count),
            f"${e.price_per_hour:.4f}",
            f"${e.usd:.2f}",
        )
    return table


def plan_table(spec: ExperimentSpec, refused: Mapping[str, str] | None = None) -> Table:
    """The candidates, each marked where the job skips it (over max_candidates; `refused` by key, job/refusals.py)."""
    refused = refused or {}
    load_s = traffic_seconds(spec.traffic)
    candidates = expand_candidates(spec)
    traffic = f"{load_s:g} s of traffic each in full ({spec.traffic.shape}, {spec.traffic.repeats} repeat(s))"
    if spec.search.adaptive and spec.variants.ranged_axes():
        return space_table(spec, len(candidates), traffic)
    probed = f"adaptive search probes up to {planned_total(spec, len(candidates))} of " if spec.search.adaptive else ""
    table = Table(title=f"{spec.name}: {probed}{len(candidates)} candidates, {traffic}", title_justify="left")
    padded = spec.variants.padding != ["max"]  # the padding column where the grid asks for another padding
    for column in (
        "configuration",
        "key",
        "optimization",
        "dynamic batching",
        "instances",
        "max batch",
        *(["padding"] if padded else []),
        "instance type",
    ):
        table.add_column(column)
    for index, c in enumerate(candidates):
        engine = c.optimization in GENERATIVE_ENGINES  # batches continuously: max batch is its sequences / slots
        batching = "continuous (the engine's)" if engine else _batching(c.dynamic_batching or False)
        capped = spec.max_candidates is not None and index >= spec.max_candidates
        mark = (
            " (over max_candidates: skipped)"
            if capped
            else " (refused before start: skipped)"
            if c.key in refused
            else ""
        )
        table.add_row(
            c.name + mark,
            c.key,
            c.optimization,
            batching,
            str(c.instance_group_count),
            str(c.max_batch_size),
            *([c.padding] if padded else []),
            c.instance_type,
        )
    table.caption = describe(spec.model)
    return table


def summary(spec: ExperimentSpec) -> str:
    """One line: how many candidates (the search's share of them) on which targets, for `run` and `validate`."""
    candidates = expand_candidates(spec)
    size = len(candidates)
    if spec.search.adaptive and spec.variants.ranged_axes():
        sampled = planned_total(spec, size)
        return f"adaptive search: up to {sampled} candidates sampled from a space of {size:,} on {_where(spec)}"
    skipped = len(planned_refusals(spec, candidates))  # skipped before any server starts: `plan` names them
    said = f"{size} candidates" + (
        f" ({skipped} skipped before any server starts: see `recommender plan`)" if skipped else ""
    )
    size -= skipped
    if spec.search.adaptive:
        count = f"{said}, adaptive search: up to {planned_total(spec, size)} probed"
    else:
        capped = planned_total(spec, size)
        count = said + (f" (the first {capped} measured: max_candidates)" if capped < size else "")
    return f"{count} on {_where(spec)}"


def _where(spec: ExperimentSpec) -> str:
    targets = spec.all_targets
    return (
        f"target {targets[0].kind} ({targets[0].instance_type})"
        if len(targets) == 1
        else f"{len(targets)} targets: " + ", ".join(target_label(t) for t in targets)
    )


def space_table(spec: ExperimentSpec, size: int, traffic: str) -> Table:
    """Adaptive search over ranges: the axes the sampler searches, not the hundreds of points of the space."""
    table = Table(
        title=f"{spec.name}: adaptive search, the sampler proposes up to {planned_total(spec, size)} "
        f"candidates from a space of {size:,}, {traffic}",
        title_justify="left",
    )
    table.add_column("axis")
    table.add_column("searched over")
    grid = spec.variants
    for axis in ("optimizations", "precisions", "dynamic_batching", "instance_group_counts", "max_batch_sizes"):
        value = getattr(grid, axis)
        shown = (
            f"range {value}"
            if isinstance(value, IntRange)
            else " | ".join(_batching(v) if axis == "dynamic_batching" else str(v) for v in value)
        )
        table.add_row(axis, shown)
    if spec.multi_target:
        table.add_row("target", " | ".join(target_label(t) for t in spec.all_targets))
    table.caption = describe(spec.model)
    return table


def _batching(choice: bool | DynamicBatching) -> str:
    if not isinstance(choice, DynamicBatching):
        return "on (defaults)" if choice else "off"
    return f"on, delay {choice.max_queue_delay_microseconds} us, preferred {choice.preferred_batch_size}"


def register(app: typer.Typer) -> None:
    app.command()(plan)
