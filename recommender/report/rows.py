"""The one row model every report format is built from: a `Report` with the study's columns, in plain data.

Markdown, HTML and CSV only lay this out; none of them computes a figure. Columns follow the published
Triton-on-SageMaker study: configuration name, model optimization, dynamic batching, instance group,
instance type, vCPUs, GPUs, GPU memory, initial instance count, invocations per minute per instance,
model latency at the percentile, cost per hour (of the fleet that serves the target load); rank and
cost per million are added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from recommender.candidates import instance_group_count_of
from recommender.decide.cost import cost_per_million_tokens_at
from recommender.decide.ranking import Excluded, RankedCandidate, RankInput
from recommender.decide.recommendation import Recommendation
from recommender.metrics.generation import GenerationFigures
from recommender.metrics.intervals import RULE as INTERVAL_RULE
from recommender.metrics.payload_lengths import PayloadLengths, cost_per_million_tokens
from recommender.metrics.stability import RULE
from recommender.report.columns import (
    COST_PER_HOUR,
    COST_PER_MILLION,
    COST_PER_MILLION_OUTPUT_TOKENS,
    COST_PER_MILLION_TOKENS,
    FLEET_SIZE,
    GENERATION_COSTS,
    GENERATION_THROUGHPUTS,
    INPUT_TOKENS,
    MAX_INVOCATIONS,
    MODEL_LATENCY,
    EndpointKind,
    Metric,
    latencies_at,
)

OPTIMIZATION_NAMES = {"pt": "PyTorch (TorchScript)", "onnx": "ONNX Runtime", "trt": "TensorRT"}


@dataclass(frozen=True)
class ReportRow:
    """One candidate: its configuration, hardware, measured figures and, when ranked, its sizing and cost."""

    key: str
    name: str
    rank: int | None
    status: str
    optimization: str
    dynamic_batching: str
    instance_group: int | None
    max_batch_size: int | None
    instance_type: str
    vcpus: int | None
    gpus: int | None
    gpu_memory_gib: float | None
    initial_instance_count: int | None  # sized on the MaxInvocations interval's lower bound when there is one
    invocations_per_minute: float | None
    model_latency_ms: float | None
    cost_per_hour: float | None  # the fleet at initial_instance_count
    cost_per_million: float | None
    score: float | None
    pareto: bool
    tied: bool
    recommended: bool
    unstable: bool  # the level decided on failed the stability rule
    excluded_reasons: tuple[str, ...]
    fleet_size_at_point: int | None = None  # the count at the point estimate of MaxInvocations
    ipm_low: float | None = None  # 95 % interval of MaxInvocations
    ipm_high: float | None = None
    interval: str | None = None  # what the interval rests on ("n=3 repeats"); None: n/a
    budget_skipped: bool = False  # the budget refused or stopped it (store flag, migration 0007)
    input_tokens_per_second: float | None = None  # at MaxInvocations (None: the run's payload was not recorded)
    cost_per_million_tokens: float | None = None  # cost per million inferences / mean input tokens per request
    generation: GenerationFigures | None = None  # a generative candidate's figures at its level (None: embeddings)
    cost_per_million_output_tokens: float | None = None  # generative: one instance's cost per million output tokens
    cost_per_million_total_tokens: float | None = None  # generative: ... per million output + input tokens

    @property
    def instances_text(self) -> str:
        """'57 (56 at the point estimate)' when the interval's lower bound sized it differently, else the count."""
        if self.initial_instance_count is None:
            return "-"
        point = self.fleet_size_at_point
        return str(self.initial_instance_count) + (
            f" ({point} at the point estimate)" if point not in (None, self.initial_instance_count) else ""
        )

    @property
    def interval_text(self) -> str:
        """'1,100 to 1,240 (n=3 repeats)', or 'n/a' without an interval."""
        if self.ipm_low is None or self.ipm_high is None:
            return "n/a"
        return f"{self.ipm_low:,.0f} to {self.ipm_high:,.0f} ({self.interval})"

    @property
    def flags(self) -> tuple[str, ...]:
        """Short words for the notes column: recommended, tied with the winner, on the Pareto front, unstable."""
        marks = (
            ("recommended", self.recommended),
            ("tied with winner", self.tied),
            ("Pareto front", self.pareto),
            ("unstable", self.unstable),
        )
        return tuple(word for word, on in marks if on)


@dataclass(frozen=True)
class ReportColumn:
    header: str
    field: str
    text: Callable[[Any], str]


@dataclass(frozen=True)
class Report:
    """Everything a report shows, in the order it shows it."""

    title: str
    description: str
    percentile: str
    threshold_ms: float
    max_error_rate: float
    target_ipm: float
    pricing: str
    facts: tuple[tuple[str, str], ...]  # the recommendation: label, value
    justification: str
    tie_notice: str | None
    notes: tuple[str, ...]
    weights: str
    rows: tuple[ReportRow, ...]  # ranked, best first
    excluded: tuple[ReportRow, ...]
    definitions: tuple[tuple[str, str], ...] = ()  # term, meaning: how the figures are computed
    time_spent: tuple[tuple[str, float], ...] = ()  # stage, seconds over the stored runs (metrics/stage_times)
    payload: PayloadLengths | None = None  # what the runs were sent: its token-length histogram (None: not recorded)
    kind: EndpointKind = "embedding"  # generative when a candidate streamed generations: its columns are shown

    def time_rows(self) -> tuple[tuple[str, str, str], ...]:
        """Where the experiment's time went: stage, seconds, share of the total (empty when no run kept its stages)."""
        total = sum(seconds for _, seconds in self.time_spent)
        if not total:
            return ()
        rows = tuple((stage, f"{seconds:,.1f}", f"{seconds / total:.0%}") for stage, seconds in self.time_spent)
        return (*rows, ("total", f"{total:,.1f}", "100%"))

    @property
    def all_rows(self) -> tuple[ReportRow, ...]:
        return self.rows + self.excluded


# --- cell text ------------------------------------------------------------------------------------


def text_or_dash(value: Any) -> str:
    return "-" if value is None else str(value)


def gib(value: Any) -> str:
    return "-" if value is None else f"{value:g} GiB"


def unpriced(_: Any) -> str:
    return "unpriced"


def metric_column(
    metric: Metric, percentile: str, field: str = "", text: Callable[[Any], str] | None = None
) -> ReportColumn:
    """A metric's column: the catalog's header, read from its field, printed in its format (unless told otherwise);
    a generation figure is read by its name from the row's generation figures."""
    if metric.figure:
        return ReportColumn(metric.heading(percentile), "generation", lambda g: metric.format(_figure(g, metric)))
    return ReportColumn(metric.heading(percentile), field or metric.field, text or metric.format)


def _figure(generation: GenerationFigures | None, metric: Metric) -> float | None:
    return generation.value(metric.figure) if generation is not None else None


def columns(percentile: str, priced: bool, kind: EndpointKind = "embedding") -> tuple[ReportColumn, ...]:
    """The table's columns, headers included; money columns say 'unpriced' instead of a number when unpriced. A
    generative report shows the catalog's generative figures (the decision percentile's latencies) instead of the
    embedding ones."""
    money = None if priced else unpriced
    head = (
        ReportColumn("rank", "rank", text_or_dash),
        ReportColumn("configuration", "name", str),
        ReportColumn("model optimization", "optimization", str),
        ReportColumn("dynamic batching", "dynamic_batching", str),
        ReportColumn("instance group", "instance_group", text_or_dash),
        ReportColumn("instance type", "instance_type", str),
        ReportColumn("vCPUs", "vcpus", text_or_dash),
        ReportColumn("GPUs", "gpus", text_or_dash),
        ReportColumn("GPU memory", "gpu_memory_gib", gib),
        metric_column(FLEET_SIZE, percentile, "instances_text", str),
    )
    if kind == "generative":
        figures = tuple(metric_column(m, percentile) for m in (*GENERATION_THROUGHPUTS, *latencies_at(percentile)))
        costs = (COST_PER_HOUR, COST_PER_MILLION, *GENERATION_COSTS)
        return (
            *head[:2],
            *head[5:],
            *figures,
            *(metric_column(m, percentile, text=money) for m in costs),
            ReportColumn("notes", "flags", ", ".join),
        )
    return (
        *head,
        metric_column(MAX_INVOCATIONS, percentile),
        ReportColumn("95 % interval", "interval_text", str),
        metric_column(INPUT_TOKENS, percentile),
        metric_column(MODEL_LATENCY, percentile),
        metric_column(COST_PER_HOUR, percentile, text=money),
        metric_column(COST_PER_MILLION, percentile, text=money),
        metric_column(COST_PER_MILLION_TOKENS, percentile, text=money),
        ReportColumn("notes", "flags", ", ".join),
    )


def excluded_columns(percentile: str, kind: EndpointKind = "embedding") -> tuple[ReportColumn, ...]:
    """Columns of the excluded-candidates table: what was measured, and every reason it is out."""
    if kind == "generative":
        return (
            ReportColumn("configuration", "name", str),
            ReportColumn("status", "status", str),
            *(metric_column(m, percentile) for m in (*GENERATION_THROUGHPUTS, *latencies_at(percentile))),
            ReportColumn("reasons", "excluded_reasons", "; ".join),
        )
    return (
        ReportColumn("configuration", "name", str),
        ReportColumn("status", "status", str),
        metric_column(MAX_INVOCATIONS, percentile),
        ReportColumn("95 % interval", "interval_text", str),
        metric_column(INPUT_TOKENS, percentile),
        metric_column(MODEL_LATENCY, percentile),
        ReportColumn("reasons", "excluded_reasons", "; ".join),
    )


def cell(row: ReportRow, column: ReportColumn) -> str:
    return column.text(getattr(row, column.field))


# --- building -------------------------------------------------------------------------------------


def build_report(rec: Recommendation) -> Report:
    """The report of one recommendation."""
    rows = tuple(_ranked_row(r, rec) for r in rec.ranking.ranked)
    excluded = tuple(_excluded_row(e, rec) for e in rec.ranking.excluded)
    weights = ", ".join(f"{name} {share:.0%}" for name, share in rec.ranking.weights.items())
    return Report(
        title=f"{rec.experiment}: serving recommendation",
        description=rec.description,
        percentile=rec.percentile,
        threshold_ms=rec.threshold_ms,
        max_error_rate=rec.max_error_rate,
        target_ipm=rec.target_ipm,
        pricing=_pricing_text(rec),
        facts=facts(rec),
        justification=rec.justification,
        tie_notice=rec.tie_notice,
        notes=rec.notes,
        weights=weights,
        rows=rows,
        excluded=excluded,
        definitions=definitions(rec.percentile),
        time_spent=tuple(rec.time_spent.items()),
        payload=rec.payload,
        kind="generative" if any(r.generation is not None for r in rows + excluded) else "embedding",
    )


def definitions(percentile: str) -> tuple[tuple[str, str], ...]:
    """How the figures are computed (README "Definitions"), in the report so it can be read on its own."""
    return (
        (
            "MaxInvocations",
            f"mean invocations per minute over the steady-state windows, every repeat pooled, of the "
            f"highest load level that meets the limits: the mean of its windows' {percentile} "
            f"latencies within the threshold and its pooled error rate within the limit (a level some "
            f"repeats did not reach does not meet them). ModelLatency: the mean of that level's "
            f"window {percentile} latencies. An excluded candidate shows its lowest level's figures.",
        ),
        ("95 % interval", INTERVAL_RULE),
        ("Stable", RULE),
        (
            "Input tokens",
            "a request's own tokens ([CLS] and [SEP] included), not its padding. Input tokens per second = "
            "MaxInvocations / 60 x the payload's mean input tokens per request; cost per million input tokens = "
            "cost per inference / that mean x 1,000,000.",
        ),
        (
            "Initial instance count",
            "ceil(target invocations per minute / MaxInvocations per instance), sized on the "
            "lower bound of the MaxInvocations interval when there is one; the count at the "
            "point estimate is shown beside it.",
        ),
    )


def facts(rec: Recommendation) -> tuple[tuple[str, str], ...]:
    """The recommendation's figures as label/value pairs (the deployment decision at a glance)."""
    winner = rec.winner
    if winner is None:
        return (("recommendation", "none"), ("why", rec.no_winner_reason or ""))
    c = winner.candidate
    fleet = rec.fleets[c.key]
    interval = (
        f"95 % interval {c.ipm_interval[0]:,.0f} to {c.ipm_interval[1]:,.0f}, {c.interval_label}"
        if c.ipm_interval
        else "interval n/a"
    )
    items = [
        ("recommended configuration", c.name),
        ("instance type", rec.pricing.instance_type),
        *([("measured on", c.served_on)] if c.served_on else []),
        *([("GPU at MaxInvocations", c.gpu)] if c.gpu else []),
        (
            FLEET_SIZE.header,
            f"{rec.fleet_size} (for {rec.target_ipm:,.0f} invocations per minute, sized on the "
            f"{fleet.sized_on}"
            + (f"; {fleet.fleet_size_at_point} at the point estimate)" if fleet.on_interval else ")"),
        ),
        *(
            [(MAX_INVOCATIONS.header, f"{MAX_INVOCATIONS.format(c.invocations_per_minute)} ({interval})")]
            if not c.generative
            else _generation_facts(rec, c)
        ),
        *([(INPUT_TOKENS.header, INPUT_TOKENS.with_unit(c.input_tokens_per_second))] if c.mean_input_tokens else []),
        (
            f"model latency ({rec.percentile})",
            f"{c.model_latency_ms:,.1f} ms (threshold {rec.threshold_ms:g} ms{_latency_basis(c)})",
        ),
    ]
    items.append(("correctness", c.correctness or ""))
    items += _cost_facts(rec, c.mean_input_tokens)
    if rec.scaling is not None:
        s = rec.scaling
        items.append(
            (
                "autoscaling",
                f"{s.min_capacity} to {s.max_capacity} instances, target "
                f"{s.target_value:,.0f} invocations per instance per minute",
            )
        )
    return tuple(items)


def _generation_facts(rec: Recommendation, c: RankInput) -> list[tuple[str, str]]:
    """A generative winner's figures at its level, each with its interval where there is one, and the SLO terms."""
    slo = rec.ranking.limits.slo_text()
    shown = (*GENERATION_THROUGHPUTS, *latencies_at(rec.percentile))
    items = [(m.header, _with_interval(m, c.generation)) for m in shown]
    costs = [(m.header, m.with_unit(v)) for m in GENERATION_COSTS if (v := _generation_cost(m, c)) is not None]
    return ([("SLO", slo)] if slo else []) + items + costs


def _with_interval(metric: Metric, generation: GenerationFigures | None) -> str:
    """'212.4 tokens/s (95 % interval 200.1 to 224.7, n=12 windows ...)', or the value alone without an interval."""
    if generation is None or generation.value(metric.figure) is None:
        return "-"
    interval = generation.interval(metric.figure)
    text = metric.with_unit(generation.value(metric.figure))
    if interval is None or not interval.known:
        return text + " (interval n/a)"
    return f"{text} (95 % interval {metric.format(interval.low)} to {metric.format(interval.high)}, {interval.label})"


def _generation_cost(metric: Metric, c: RankInput) -> float | None:
    tokens = c.generated("output_tps") if metric is COST_PER_MILLION_OUTPUT_TOKENS else c.total_tps
    return cost_per_million_tokens_at(c.cost_per_hour, tokens)


def _latency_basis(c: RankInput) -> str:
    """'; 95 % interval 36.1 to 39.9 ms, n=3 repeats; over 4,812 requests' (what is known of it)."""
    text = (
        f"; 95 % interval {c.latency_interval[0]:,.1f} to {c.latency_interval[1]:,.1f} ms, {c.latency_interval_label}"
        if c.latency_interval
        else ""
    )
    return text + (f"; over {c.samples:,} requests" if c.samples else "")


def _cost_facts(rec: Recommendation, mean_tokens: float | None) -> list[tuple[str, str]]:
    plan = rec.capacity
    if plan is None:
        return [("cost", f"unpriced (not free): {rec.pricing.instance_type} has no price")]
    per_million_tokens = cost_per_million_tokens(plan.cost_per_million, mean_tokens)
    return [
        ("cost per hour", f"{plan.cost_per_hour:,.2f} USD ({rec.fleet_size} x {plan.price_per_hour:g} USD)"),
        ("cost per inference", f"{plan.cost_per_inference:.3e} USD"),
        ("cost per million inferences", f"{plan.cost_per_million:,.4f} USD"),
        *([("cost per million input tokens", f"{per_million_tokens:,.4f} USD")] if per_million_tokens else []),
    ]


def _pricing_text(rec: Recommendation) -> str:
    pricing = rec.pricing
    if not pricing.priced:
        return f"{pricing.instance_type} is unpriced (not free): {pricing.unpriced_because}"
    return f"{pricing.price_per_hour:g} USD per instance-hour for {pricing.instance_type} ({pricing.source})"


def _ranked_row(ranked: RankedCandidate, rec: Recommendation) -> ReportRow:
    fleet = rec.fleets[ranked.candidate.key]
    row = _row(
        ranked.candidate,
        rec,
        rank=ranked.rank,
        count=fleet.fleet_size,
        hourly=fleet.cost_per_hour,
        per_million=ranked.cost_per_million,
        score=ranked.score,
        pareto=ranked.pareto,
        tied=ranked.tied_with_winner,
        reasons=(),
    )
    return replace(row, fleet_size_at_point=fleet.fleet_size_at_point)


def _excluded_row(excluded: Excluded, rec: Recommendation) -> ReportRow:
    return _row(
        excluded.candidate,
        rec,
        rank=None,
        count=None,
        hourly=None,
        per_million=None,
        score=None,
        pareto=False,
        tied=False,
        reasons=excluded.reasons,
    )


def _row(
    c: RankInput,
    rec: Recommendation,
    *,
    rank: int | None,
    count: int | None,
    hourly: float | None,
    per_million: float | None,
    score: float | None,
    pareto: bool,
    tied: bool,
    reasons: tuple[str, ...],
) -> ReportRow:
    config, hardware = c.config, rec.pricing_of(c.key).hardware  # each candidate on its own target's instance type
    return ReportRow(
        key=c.key,
        name=c.name,
        rank=rank,
        status=c.status_text,
        optimization=OPTIMIZATION_NAMES.get(str(config.get("optimization")), str(config.get("optimization"))),
        dynamic_batching=describe_batching(config.get("dynamic_batching")),
        instance_group=instance_group_count_of(config),
        max_batch_size=config.get("max_batch_size"),
        instance_type=c.instance_type,
        vcpus=hardware.vcpus if hardware else None,
        gpus=hardware.gpus if hardware else None,
        gpu_memory_gib=hardware.gpu_memory_gib if hardware else None,
        initial_instance_count=count,
        invocations_per_minute=c.invocations_per_minute,
        model_latency_ms=c.model_latency_ms,
        cost_per_hour=hourly,
        cost_per_million=per_million,
        score=score,
        pareto=pareto,
        tied=tied,
        recommended=rank == 1,
        unstable=c.key in rec.unstable,
        excluded_reasons=reasons,
        ipm_low=c.ipm_interval[0] if c.ipm_interval else None,
        ipm_high=c.ipm_interval[1] if c.ipm_interval else None,
        interval=c.interval_label,
        budget_skipped=c.budget_skipped,
        input_tokens_per_second=c.input_tokens_per_second,
        cost_per_million_tokens=cost_per_million_tokens(per_million, c.mean_input_tokens),
        generation=c.generation,
        cost_per_million_output_tokens=cost_per_million_tokens_at(
            hourly and c.cost_per_hour, c.generated("output_tps")
        ),
        cost_per_million_total_tokens=cost_per_million_tokens_at(hourly and c.cost_per_hour, c.total_tps),
    )


def describe_batching(settings: dict | None) -> str:
    """'off', or 'on, 2000 us, preferred 4/8' from the stored dynamic_batching settings."""
    if not settings:
        return "off"
    text = f"on, {settings.get('max_queue_delay_microseconds', 0)} us"
    preferred = settings.get("preferred_batch_size") or []
    return text + (f", preferred {'/'.join(str(size) for size in preferred)}" if preferred else "")
