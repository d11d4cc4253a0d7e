"""The CSV report: one line per candidate (ranked first, then excluded), raw numbers, no formatting."""

from __future__ import annotations

import csv
import io

from recommender.report.columns import (
    COST_PER_HOUR,
    COST_PER_MILLION,
    COST_PER_MILLION_TOKENS,
    FLEET_SIZE,
    INPUT_TOKENS,
    MAX_INVOCATIONS,
    MODEL_LATENCY,
    only_for,
)
from recommender.report.rows import Report

FIELDS = (  # header ("{p}": the percentile), ReportRow attribute; the metrics' from the catalog (report/columns.py)
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
    (FLEET_SIZE.csv_heading("{p}"), FLEET_SIZE.field),
    (FLEET_SIZE.csv_heading("{p}") + " at point estimate", "fleet_size_at_point"),
    (MAX_INVOCATIONS.csv_heading("{p}"), MAX_INVOCATIONS.field),
    ("interval low", "ipm_low"),
    ("interval high", "ipm_high"),
    ("interval n", "interval"),
    (INPUT_TOKENS.csv_heading("{p}"), INPUT_TOKENS.field),
    (MODEL_LATENCY.csv_heading("{p}"), MODEL_LATENCY.field),
    (COST_PER_HOUR.csv_heading("{p}"), COST_PER_HOUR.field),
    (COST_PER_MILLION.csv_heading("{p}"), COST_PER_MILLION.field),
    (COST_PER_MILLION_TOKENS.csv_heading("{p}"), COST_PER_MILLION_TOKENS.field),
    ("score", "score"),
    ("pareto", "pareto"),
    ("tied with winner", "tied"),
    ("recommended", "recommended"),
    ("unstable", "unstable"),
    ("excluded reasons", "excluded_reasons"),
    ("key", "key"),
)


# a generative report's own figures, every one the catalog has for it (every percentile), after the shared fields
GENERATIVE_ONLY = only_for("generative")


def render_csv(report: Report) -> str:
    """Header plus one line per candidate; empty cells for missing figures (an unpriced cost is empty, never 0). A
    generative report adds a column for each generative figure of the catalog."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    extra = GENERATIVE_ONLY if report.kind == "generative" else ()
    writer.writerow([header.format(p=report.percentile) for header, _ in FIELDS] + [m.csv_heading("") for m in extra])
    for row in report.all_rows:
        writer.writerow([_value(getattr(row, field)) for _, field in FIELDS] + [_value(m.read(row)) for m in extra])
    return buffer.getvalue()


def _value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return "; ".join(value)
    if isinstance(value, float):
        return repr(round(value, 10))
    return str(value)
