"""Server-side metrics: the delta of Triton's model statistics (/v2/models/<name>/stats) over a run."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

PARTS = ("queue", "compute_input", "compute_infer", "compute_output")


@dataclass(frozen=True)
class StatsDelta:
    """What the server did between two statistics snapshots."""

    inference_count: int  # requests (batch elements) inferred successfully
    execution_count: int  # model executions (batches)
    failures: int
    avg_us: dict[str, float | None]  # per request: queue, compute_input, compute_infer, compute_output

    @property
    def avg_batch_size(self) -> float | None:
        return self.inference_count / self.execution_count if self.execution_count else None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["avg_batch_size"] = self.avg_batch_size
        return data


def _model_entry(snapshot: dict[str, Any]) -> dict[str, Any]:
    entries = snapshot.get("model_stats") or [{}]
    return entries[0]


def _counter(entry: dict[str, Any], part: str, field: str) -> int:
    return int(entry.get("inference_stats", {}).get(part, {}).get(field, 0))


def stats_delta(before: dict[str, Any], after: dict[str, Any]) -> StatsDelta:
    """The difference of two snapshots; averages are per successful request, in microseconds."""
    b, a = _model_entry(before), _model_entry(after)
    successes = _counter(a, "success", "count") - _counter(b, "success", "count")
    avg: dict[str, float | None] = {}
    for part in PARTS:
        ns = _counter(a, part, "ns") - _counter(b, part, "ns")
        avg[part] = ns / successes / 1000.0 if successes > 0 else None
    return StatsDelta(
        inference_count=int(a.get("inference_count", 0)) - int(b.get("inference_count", 0)),
        execution_count=int(a.get("execution_count", 0)) - int(b.get("execution_count", 0)),
        failures=_counter(a, "fail", "count") - _counter(b, "fail", "count"),
        avg_us=avg,
    )
