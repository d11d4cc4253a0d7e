"""The metric catalog labels and prints every metric column the same way in the terminal, report, CSV and dashboard."""

from __future__ import annotations

import dataclasses

from recommender.cli.tables import COLUMNS
from recommender.metrics.headline import Headline
from recommender.report.columns import (
    COST_PER_MILLION,
    ERROR_RATE,
    MAX_INVOCATIONS,
    METRICS,
    MODEL_LATENCY,
)
from recommender.report.csv_table import FIELDS
from recommender.report.rows import ReportRow, columns, excluded_columns


def test_a_metric_prints_its_value_in_its_format_and_a_dash_when_missing() -> None:
    assert MAX_INVOCATIONS.format(1234.4) == "1,234"
    assert MODEL_LATENCY.format(38.04) == "38.0" and MODEL_LATENCY.format(None) == "-"
    assert ERROR_RATE.format(0.0125) == "1.25%"
    assert COST_PER_MILLION.with_unit(22.72839) == "22.7284 USD" and COST_PER_MILLION.with_unit(None) == "-"
    assert MODEL_LATENCY.heading("p99") == "model latency (p99, ms)" and MODEL_LATENCY.csv_heading("p99") == (
        "model latency p99 (ms)"
    )


def test_every_metric_has_its_labels_unit_and_direction() -> None:
    for name, metric in METRICS.items():
        assert metric.name == name and metric.header and metric.short and metric.frame and metric.unit
        assert metric.better in ("lower", "higher") and metric.meaning


def test_the_accessors_name_real_fields() -> None:
    row_fields = {f.name for f in dataclasses.fields(ReportRow)}
    headline_fields = {f.name for f in dataclasses.fields(Headline)}
    assert all(m.field in row_fields for m in METRICS.values() if m.field)
    assert all(m.headline in headline_fields for m in METRICS.values() if m.headline)


def test_the_tables_take_their_metric_labels_from_the_catalog() -> None:
    terminal = {column.label for column in COLUMNS}
    assert {MAX_INVOCATIONS.short, MODEL_LATENCY.short, COST_PER_MILLION.short, ERROR_RATE.short} <= terminal
    report = {column.header: column.field for column in (*columns("p95", True), *excluded_columns("p95"))}
    for metric in (MAX_INVOCATIONS, MODEL_LATENCY, COST_PER_MILLION):
        assert report[metric.heading("p95")] == metric.field
        assert (metric.csv_heading("{p}"), metric.field) in FIELDS
