"""The words the numbers are reported in, defined once: latency percentiles and the metric catalog.

Metrics are data (name, unit, which direction is better, what it means), not a class per metric; the CLI,
the report and the dashboard label their columns from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal

Percentile = Literal["p50", "p90", "p95", "p99"]

# Latency percentiles the platform measures, stores and can decide on: name -> q (per cent).
PERCENTILES: Mapping[str, float] = MappingProxyType({"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0})
PERCENTILE_NAMES: tuple[str, ...] = tuple(PERCENTILES)
DEFAULT_PERCENTILE: Percentile = "p95"


@dataclass(frozen=True)
class Metric:
    """One reported figure: its name, unit, which direction is better, and a one-line meaning."""

    name: str
    unit: str
    better: Literal["lower", "higher"]
    meaning: str


METRICS: Mapping[str, Metric] = MappingProxyType(
    {
        m.name: m
        for m in (
            Metric(
                "max_invocations",
                "invocations/min",
                "higher",
                "MaxInvocations: mean invocations per minute over the windows (all repeats) of the highest load level "
                "within the latency threshold and error limit",
            ),
            Metric(
                "model_latency",
                "ms",
                "lower",
                "ModelLatency: the mean of the threshold percentile's window latencies at that level",
            ),
            Metric("error_rate", "share", "lower", "failed requests / all requests in the steady-state windows"),
            Metric("cost_per_hour", "USD/hour", "lower", "CostPerHour: price per instance-hour x instances"),
            Metric("cost_per_million", "USD", "lower", "cost of one million inferences at MaxInvocations"),
            Metric("fleet_size", "instances", "lower", "InitialInstanceCount: instances needed for the target load"),
            Metric("queue_time", "ms", "lower", "Triton's average queue time per request at MaxInvocations"),
            Metric("compute_time", "ms", "lower", "Triton's average compute time (input + infer + output) per request"),
            Metric("avg_batch_size", "requests", "higher", "inferences per model execution (dynamic batching at work)"),
        )
    }
)
