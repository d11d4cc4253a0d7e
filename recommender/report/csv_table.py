"""The CSV report: one line per candidate (ranked first, then excluded), raw numbers, no formatting."""

from __future__ import annotations

import csv
import io

from recommender.report.rows import Report, Row

FIELDS = (
    ("rank", "rank"),
    ("configuration", "name"),
    ("status", "status"),
    ("model optimization", "optimization"),
    ("dynamic batching", "dynamic_batching"),
    ("instance group", "instance_group"),
    ("max batch size", "max_batch_size"),
    ("instance type", "instance_type"),
    ("vCPUs", "vcpus"),
    ("GPUs", "gpus"),
    ("GPU memory (GiB)", "gpu_memory_gib"),
    ("initial instance count", "initial_instance_count"),
    ("initial instance count at point estimate", "fleet_size_at_point"),
    ("invocations per minute per instance", "invocations_per_minute"),
    ("interval low", "ipm_low"),
    ("interval high", "ipm_high"),
    ("interval n", "interval"),
    ("model latency (ms)", "latency_ms"),
    ("cost per hour (USD)", "cost_per_hour"),
    ("cost per million (USD)", "cost_per_million"),
    ("score", "score"),
    ("pareto", "pareto"),
    ("tied with winner", "tied"),
    ("recommended", "recommended"),
    ("unstable", "unstable"),
    ("excluded reasons", "excluded_reasons"),
    ("key", "key"),
)


def render_csv(report: Report) -> str:
    """Header plus one line per candidate; empty cells for missing figures (an unpriced cost is empty, never 0)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([header.replace("model latency", f"model latency {report.percentile}") for header, _ in FIELDS])
    for row in report.all_rows:
        writer.writerow([_value(row, field) for _, field in FIELDS])
    return buffer.getvalue()


def _value(row: Row, field: str) -> str:
    value = getattr(row, field)
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "; ".join(value)
    if isinstance(value, float):
        return repr(round(value, 10))
    return str(value)
