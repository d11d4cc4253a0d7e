"""The server figures are listed once, and the list is the store's window columns."""

from __future__ import annotations

from recommender.metrics.headline import ServerStats
from recommender.metrics.server_figures import FIGURES, SERVER_FIGURES, SERVER_PARTS
from recommender.store.schema import WindowRow

CLIENT_COLUMNS = {
    "id",
    "run_id",
    "repeat",
    "phase_index",
    "window_index",
    "start_s",
    "end_s",
    "load",
    "requests",
    "errors",
    "samples",
    "invocations_per_minute",
    "stable",
    "late_share",
    "generator_cpu_percent",
    "generation",
    "p50_ms",
    "p90_ms",
    "p95_ms",
    "p99_ms",
}


def test_the_server_figures_are_the_window_columns_the_client_does_not_measure():
    columns = list(WindowRow.__table__.columns.keys())
    assert [name for name in columns if name not in CLIENT_COLUMNS] == list(SERVER_FIGURES)
    assert all(WindowRow.__table__.columns[name].nullable for name in SERVER_FIGURES)


def test_every_figure_has_a_unit_and_a_label_and_the_parts_are_the_request_time_columns():
    assert len(set(SERVER_FIGURES)) == len(FIGURES) and all(f.unit and f.label for f in FIGURES)
    assert SERVER_PARTS == ("queue", "compute_input", "compute_infer", "compute_output")
    assert all(f"{part}_us" in SERVER_FIGURES for part in SERVER_PARTS)
    at = {f"{part}_us": 1000.0 * (i + 1) for i, part in enumerate(SERVER_PARTS)}
    assert list(ServerStats(at_max_invocations=at).time_per_request_us().values()) == list(at.values())
