"""Dashboard tables and charts from plain data: the optional measurement fields are shown when present."""

from __future__ import annotations

from datetime import UTC, datetime

import altair as alt

from dashboard import charts, frames
from recommender.candidates import CandidateResult
from recommender.metrics.headline import Headline


def result(name: str, headline: dict | None = None, status: str = "ok", config: dict | None = None) -> CandidateResult:
    """A result whose headline is read from stored JSON (`headline`), as the store reads it."""
    return CandidateResult(
        key=name,
        name=name,
        config=config or {"optimization": "onnx", "max_batch_size": 4},
        status=status,
        reason=None,
        headline=Headline.from_dict(headline),
        server_stats=None,
        run_id=1,
        duration_s=1.0,
        finished_at=datetime(2025, 1, 1, tzinfo=UTC),
    )


BASE = {"invocations_per_minute": 1200.0, "latency_ms": {"p50": 5.0, "p95": 9.0}, "error_rate": 0.0}


def test_new_headline_fields_appear_only_when_present():
    old = frames.metrics_table([result("a", BASE)])
    assert "max invocations" not in old.index and "stable" not in old.index
    new = frames.metrics_table(
        [
            result(
                "a",
                BASE
                | {
                    "max_invocations": 1500.0,
                    "stable": False,
                    "stop_reason": "latency threshold",
                    "ipm_interval": {"mean": 1200, "low": 1100, "high": 1300, "n": 3},
                    "latency_interval": {"mean": 9.0, "low": 8.5, "high": 9.5, "n": 3},
                },
            )
        ]
    )
    assert new.loc["max invocations", "a"] == "1,500"
    assert new.loc["stable", "a"] == "no"
    assert new.loc["stop reason", "a"] == "latency threshold"
    assert new.loc["ipm interval", "a"] == "1,100 to 1,300 (n=3 repeats)"
    assert new.loc["latency interval", "a"] == "8.5 to 9.5 (n=3 repeats)"
    assert frames.candidate_row(result("a", BASE | {"stable": True}))["stable"] is True


def test_compare_counts_input_tokens_where_the_run_recorded_its_payload():
    from dataclasses import replace

    from recommender.metrics.payload_lengths import payload_lengths

    old = frames.metrics_table([result("a", BASE | {"max_invocations": 1500.0})])
    assert "input tokens/s" not in old.index  # a run stored before its payload was: no row of dashes
    sent = payload_lengths("0123456789abcdef", "queries.jsonl", [8, 16])  # 12 input tokens per request
    new = frames.metrics_table([replace(result("a", BASE | {"max_invocations": 1500.0}), payload=sent.to_dict())])
    assert new.loc["input tokens/s", "a"] == "300" and new.loc["input tokens per request", "a"] == "12"


def test_config_difference_marks_the_settings_that_differ():
    table = frames.config_difference(
        [
            result("a", config={"optimization": "pt", "max_batch_size": 4}),
            result("b", config={"optimization": "onnx", "max_batch_size": 4}),
        ]
    )
    assert table.loc["optimization", "differs"] and not table.loc["max_batch_size", "differs"]


def test_windows_are_labelled_and_drawn_as_bands():
    windows = frames.windows_frame(
        result("a"), [{"start_s": 1.0, "end_s": 3.0, "stable": True}, {"start_s": 3.0, "end_s": 5.0, "stable": False}]
    )
    assert windows["window"].tolist() == ["stable", "unstable"]
    second = {"ok": 10, "users": 1, "p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0}
    series = frames.series_frame(result("a"), [{"second": 0} | second, {"second": 1} | second])
    assert series["invocations/min"].tolist() == [600]
    spec = charts.throughput_over_time(series, windows).to_dict()
    assert "mark_rect" in str(spec) or "rect" in str(spec)
    assert frames.windows_frame(result("a"), []).empty


def test_the_series_leaves_out_the_last_partial_second():
    """The store keeps ceil(duration) seconds: the last one holds only the run's tail and would read as a drop."""
    rows = [
        {"second": s, "ok": ok, "users": 2, "p50_ms": 1.0, "p95_ms": 2.0, "p99_ms": 3.0}
        for s, ok in enumerate((10, 11, 1))
    ]
    series = frames.series_frame(result("a"), rows)
    assert series["second"].tolist() == [0, 1]
    assert series["invocations/min"].tolist() == [600, 660]
    assert len(rows) == 3  # the stored rows are left as they are


def test_server_breakdown_is_in_milliseconds():
    r = CandidateResult(
        "k",
        "a",
        {},
        "ok",
        None,
        Headline.from_dict(BASE),
        {"avg_us": {"queue": 1500.0, "compute_infer": 500.0}},
        1,
        1.0,
        None,
    )
    table = frames.server_breakdown([r])
    assert table.set_index("part")["ms"].to_dict() == {"queue": 1.5, "compute_infer": 0.5}
    assert isinstance(charts.server_time(table), alt.Chart)
