"""The metric catalog: every reported figure's labels, unit, direction, print format and where it is read from.

The terminal table (cli/tables.py), the report rows and their Markdown, HTML and CSV layouts (report/rows.py,
report/csv_table.py) and the dashboard frames (dashboard/frames.py) take their metric columns from here, so a figure
is labelled and printed the same way wherever it appears. `header` is the report's (the published study's words),
`short` the terminal's (narrow columns), `frame` the dashboard's; "{p}" in a label stands for the percentile.
Each metric says which endpoint kinds it applies to (`kinds`: embedding, generative), so every presentation shows a
generative experiment's columns from this one catalog (`for_kind`); a generation figure is read by its name in the
row's `GenerationFigures` (`figure`, metrics/generation.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from recommender.vocabulary import PERCENTILE_NAMES

EndpointKind = Literal["embedding", "generative"]
EMBEDDING: frozenset[EndpointKind] = frozenset({"embedding"})
GENERATIVE: frozenset[EndpointKind] = frozenset({"generative"})
BOTH: frozenset[EndpointKind] = EMBEDDING | GENERATIVE


@dataclass(frozen=True)
class Metric:
    """One reported figure.

    `field` is the accessor: the attribute of the report's `ReportRow` (report/rows.py) that holds it, which the report
    and the CSV read; `headline` the attribute of the run's `Headline` (metrics/headline.py) the dashboard reads
    ("" where the figure is not a headline one). `digits` and `style` are how a value is printed.
    """

    name: str
    header: str
    short: str
    frame: str
    unit: str
    better: Literal["lower", "higher"]
    meaning: str
    field: str = ""
    headline: str = ""
    digits: int = 0
    style: Literal["number", "share"] = "number"
    csv: str = ""  # the CSV's header where it differs from `header`
    kinds: frozenset[EndpointKind] = EMBEDDING  # the endpoint kinds it applies to
    figure: str = ""  # a generation figure's name in the row's `generation` (GenerationFigures); "" otherwise

    def format(self, value: Any) -> str:
        """The value as printed: grouped with `digits` decimals, a share as a percentage, '-' when missing."""
        if value is None:
            return "-"
        if self.style == "share":
            return f"{value:.{self.digits}%}"
        return f"{value:,.{self.digits}f}"

    def with_unit(self, value: Any) -> str:
        """'22.7284 USD': the printed value followed by its unit ('-' when missing)."""
        return "-" if value is None else f"{self.format(value)} {self.unit}"

    def heading(self, percentile: str) -> str:
        return self.header.format(p=percentile)

    def csv_heading(self, percentile: str) -> str:
        return (self.csv or self.header).format(p=percentile)

    def read(self, row: Any) -> Any:
        """The value from a report row (by `field`, or a generation figure by its name; None where it has none)."""
        if self.figure:
            generation = getattr(row, "generation", None)
            return generation.value(self.figure) if generation is not None else None
        return getattr(row, self.field)

    def applies(self, kind: EndpointKind) -> bool:
        return kind in self.kinds


MAX_INVOCATIONS = Metric(
    "max_invocations",
    header="invocations per minute per instance",
    short="MaxInvocations/min",
    frame="max invocations",
    unit="invocations/min",
    better="higher",
    meaning="MaxInvocations: mean invocations per minute over the windows (all repeats) of the highest load level "
    "within the latency threshold and error limit",
    field="invocations_per_minute",
    headline="max_invocations",
)
INVOCATIONS = Metric(
    "invocations_per_minute",
    header="invocations per minute",
    short="invocations/min",
    frame="invocations/min",
    unit="invocations/min",
    better="higher",
    meaning="the run's throughput as shown: MaxInvocations when a level meets the limits, else its lowest level's",
    headline="invocations_per_minute",
)
MODEL_LATENCY = Metric(
    "model_latency",
    header="model latency ({p}, ms)",
    short="{p} ms",
    frame="model latency ms",
    unit="ms",
    better="lower",
    meaning="ModelLatency: the mean of the threshold percentile's window latencies at that level",
    field="model_latency_ms",
    headline="model_latency_ms",
    digits=1,
    csv="model latency {p} (ms)",
)
ERROR_RATE = Metric(
    "error_rate",
    header="error rate",
    short="errors",
    frame="error rate",
    unit="share",
    better="lower",
    meaning="failed requests / all requests in the steady-state windows",
    headline="error_rate",
    digits=2,
    style="share",
    kinds=BOTH,
)
COST_PER_HOUR = Metric(
    "cost_per_hour",
    header="cost per hour (USD)",
    short="cost per hour",
    frame="cost per hour (USD)",
    unit="USD/hour",
    better="lower",
    meaning="CostPerHour: price per instance-hour x instances",
    field="cost_per_hour",
    digits=2,
    kinds=BOTH,
)
COST_PER_MILLION = Metric(
    "cost_per_million",
    header="cost per million (USD)",
    short="cost per million",
    frame="cost per million (USD)",
    unit="USD",
    better="lower",
    meaning="cost of one million inferences at MaxInvocations",
    field="cost_per_million",
    digits=4,
    kinds=BOTH,
)
INPUT_TOKENS = Metric(
    "input_tokens_per_second",
    header="input tokens per second per instance",
    short="tokens/s",
    frame="input tokens/s",
    unit="tokens/s",
    better="higher",
    meaning="MaxInvocations / 60 x the payload's mean input tokens per request (a request's own tokens, [CLS] and "
    "[SEP] included, not padding)",
    field="input_tokens_per_second",
)
COST_PER_MILLION_TOKENS = Metric(
    "cost_per_million_tokens",
    header="cost per million input tokens (USD)",
    short="per M tokens",
    frame="cost per million tokens (USD)",
    unit="USD",
    better="lower",
    meaning="cost per inference / the payload's mean input tokens per request x 1,000,000",
    field="cost_per_million_tokens",
    digits=4,
)
FLEET_SIZE = Metric(
    "fleet_size",
    header="initial instance count",
    short="instances",
    frame="initial instance count",
    unit="instances",
    better="lower",
    meaning="InitialInstanceCount: instances needed for the target load",
    field="initial_instance_count",
    kinds=BOTH,
)
QUEUE_TIME = Metric(
    "queue_time",
    header="queue time (ms)",
    short="queue",
    frame="queue ms",
    unit="ms",
    better="lower",
    meaning="Triton's average queue time per request at MaxInvocations",
    digits=1,
)
COMPUTE_TIME = Metric(
    "compute_time",
    header="compute time (ms)",
    short="compute",
    frame="compute ms",
    unit="ms",
    better="lower",
    meaning="Triton's average compute time (input + infer + output) per request",
    digits=1,
)
AVG_BATCH_SIZE = Metric(
    "avg_batch_size",
    header="avg batch size",
    short="avg batch",
    frame="avg batch size",
    unit="requests",
    better="higher",
    meaning="inferences per model execution (dynamic batching at work)",
    digits=2,
)


def _generation_latency(metric: str, label: str, meaning: str, percentile: str) -> Metric:
    return Metric(
        f"{metric}_{percentile}",
        header=f"{label} {percentile} (ms)",
        short=f"{label} {percentile}",
        frame=f"{label} {percentile} ms",
        unit="ms",
        better="lower",
        meaning=f"{meaning}: the mean of the level's window {percentile}s",
        field="generation",
        digits=1,
        kinds=GENERATIVE,
        figure=f"{metric}_ms.{percentile}",
    )


GENERATION_LATENCIES: tuple[Metric, ...] = tuple(
    _generation_latency(metric, label, meaning, p)
    for metric, label, meaning in (
        ("ttft", "TTFT", "time to first token: the first content chunk, from the send"),
        ("itl", "ITL", "inter-token latency: (end-to-end - TTFT) / (output tokens - 1), requests of 2 tokens or more"),
        ("e2e", "E2E", "end-to-end latency: the stream's end, from the send"),
    )
    for p in PERCENTILE_NAMES
)
GOODPUT = Metric(
    "goodput",
    header="goodput (requests/s)",
    short="goodput/s",
    frame="goodput (req/s)",
    unit="requests/s",
    better="higher",
    meaning="requests per second that met every SLO term (each request's own TTFT, ITL and end-to-end within the "
    "thresholds), at the highest load level whose figures meet the SLOs: the generative MaxInvocations",
    field="generation",
    digits=2,
    kinds=GENERATIVE,
    figure="goodput",
)
REQUEST_THROUGHPUT = Metric(
    "request_throughput",
    header="request throughput (requests/s)",
    short="req/s",
    frame="request throughput (req/s)",
    unit="requests/s",
    better="higher",
    meaning="successful requests completed per second at that level",
    field="generation",
    digits=2,
    kinds=GENERATIVE,
    figure="request_throughput",
)
OUTPUT_TPS = Metric(
    "output_tokens_per_second",
    header="output tokens per second per instance",
    short="out tok/s",
    frame="output tokens/s per instance",
    unit="tokens/s",
    better="higher",
    meaning="the output tokens of the requests completed in a window over its seconds, at that level",
    field="generation",
    kinds=GENERATIVE,
    figure="output_tps",
)
OUTPUT_TPS_PER_USER = Metric(
    "output_tokens_per_second_per_user",
    header="output tokens per second per user",
    short="tok/s/user",
    frame="output tokens/s per user",
    unit="tokens/s",
    better="higher",
    meaning="per request, output tokens / (end-to-end - TTFT), averaged over the requests, at that level",
    field="generation",
    digits=1,
    kinds=GENERATIVE,
    figure="output_tps_per_user",
)
COST_PER_MILLION_OUTPUT_TOKENS = Metric(
    "cost_per_million_output_tokens",
    header="cost per million output tokens (USD)",
    short="per M out tok",
    frame="cost per million output tokens (USD)",
    unit="USD",
    better="lower",
    meaning="cost per hour of one instance / (output tokens per second x 3,600) x 1,000,000",
    field="cost_per_million_output_tokens",
    digits=4,
    kinds=GENERATIVE,
)
COST_PER_MILLION_TOTAL_TOKENS = Metric(
    "cost_per_million_total_tokens",
    header="cost per million total tokens (USD)",
    short="per M tok",
    frame="cost per million total tokens (USD)",
    unit="USD",
    better="lower",
    meaning="cost per hour of one instance / ((output + input) tokens per second x 3,600) x 1,000,000",
    field="cost_per_million_total_tokens",
    digits=4,
    kinds=GENERATIVE,
)
GENERATION_THROUGHPUTS = (GOODPUT, REQUEST_THROUGHPUT, OUTPUT_TPS, OUTPUT_TPS_PER_USER)
GENERATION_COSTS = (COST_PER_MILLION_OUTPUT_TOKENS, COST_PER_MILLION_TOTAL_TOKENS)

METRICS: Mapping[str, Metric] = MappingProxyType(
    {
        m.name: m
        for m in (
            MAX_INVOCATIONS,
            INVOCATIONS,
            INPUT_TOKENS,
            MODEL_LATENCY,
            ERROR_RATE,
            COST_PER_HOUR,
            COST_PER_MILLION,
            COST_PER_MILLION_TOKENS,
            FLEET_SIZE,
            QUEUE_TIME,
            COMPUTE_TIME,
            AVG_BATCH_SIZE,
            *GENERATION_THROUGHPUTS,
            *GENERATION_LATENCIES,
            *GENERATION_COSTS,
        )
    }
)


def only_for(kind: EndpointKind) -> tuple[Metric, ...]:
    """The catalog's metrics that apply to this endpoint kind alone (a generative run's own figures)."""
    return tuple(m for m in METRICS.values() if m.kinds == frozenset({kind}))


def for_kind(kind: EndpointKind) -> tuple[Metric, ...]:
    """The catalog's metrics that apply to an endpoint kind, in catalog order."""
    return tuple(m for m in METRICS.values() if m.applies(kind))


def latencies_at(percentile: str) -> tuple[Metric, ...]:
    """TTFT, ITL and end-to-end at one percentile (the decision's: what narrow views show)."""
    return tuple(m for m in GENERATION_LATENCIES if m.name.endswith(f"_{percentile}"))
