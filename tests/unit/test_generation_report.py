"""A generative experiment from the store to what the user reads: `rank` and `report` (Markdown, CSV) show the
catalog's generative columns, ranked on goodput under the experiment file's SLO, with cost per million tokens."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from recommender.candidates import expand_candidates
from recommender.cli import build_app
from recommender.metrics.headline import Headline
from recommender.metrics.rules import Rules
from recommender.metrics.steady import measure_windows
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests.unit.test_generation_metrics import generative_log

SPEC = {
    "name": "llm",
    "variants": {"dynamic_batching": [False], "instance_group_counts": [1, 2]},
    "latency_threshold": {"percentile": "p95", "ms": 5000},
    "slo": {"ttft_ms": {"p95": 100}, "itl_ms": {"p95": 20}},
    "target": {"price_per_hour": 3.6},
}
# candidate -> per level (requests a 1-s window, TTFT ms, ITL ms): ig1 keeps ITL within 20 ms up to 40 requests/s,
# ig2 breaks the ITL SLO at its higher level and keeps it at 30 requests/s
LEVELS = {
    "pt-nodb-ig1-mbs8": [(20, 30.0, 8.0), (40, 60.0, 15.0)],
    "pt-nodb-ig2-mbs8": [(30, 40.0, 10.0), (60, 90.0, 30.0)],
}
TOKENS = 11  # output tokens a request: ITL = (e2e - TTFT) / 10


def windows(levels: list[tuple[int, float, float]]) -> list:
    t, ttft, e2e, spans = [], [], [], []
    for phase, (requests, first, itl) in enumerate(levels):
        for k in range(4):
            start = phase * 10 + k
            spans.append((phase, float(start), float(start + 1)))
            t += list(np.linspace(start, start + 0.4, requests))
            ttft += [first + k] * requests
            e2e += [first + k + (TOKENS - 1) * itl] * requests
    log = generative_log(t, ttft, e2e, [TOKENS] * len(t))
    return [(0, w) for w in measure_windows(log, spans, [1.0, 2.0], Rules())]


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store, spec = ResultStore.open(url), ExperimentSpec.model_validate(SPEC)
    experiment_id = store.save_experiment(spec, status="done")
    for candidate in expand_candidates(spec):
        run = store.start_run(store.save_candidate(experiment_id, candidate), "current", None)
        store.finish_run(run, "ok", headline=Headline(repeats=1), windows=windows(LEVELS[candidate.name]))
    return url


def invoke(*args: str):
    result = CliRunner().invoke(build_app(), list(args))
    assert result.exit_code == 0, result.output
    return result.output


def test_rank_ranks_on_goodput_under_the_slo_and_shows_the_generative_figures(url) -> None:
    ranked = json.loads(invoke("rank", "llm", "--db", url, "--json"))["ranked"]
    # ig1 meets the SLO at 40 requests/s, ig2 only at 30: ig1 first, each at its goodput
    assert [(r["name"], round(r["invocations_per_minute"])) for r in ranked] == [
        ("pt-nodb-ig1-mbs8", 40 * 60),
        ("pt-nodb-ig2-mbs8", 30 * 60),
    ]
    first = ranked[0]
    assert first["generation"]["output_tps"]["value"] == pytest.approx(40 * TOKENS)
    assert first["generation"]["itl_ms.p95"]["value"] == pytest.approx(15.0)
    # 3.6 USD an hour for 440 tokens/s: 3.6 / (440 x 3,600) x 1e6
    assert first["cost_per_million_output_tokens"] == pytest.approx(3.6 / (440 * 3600) * 1e6)
    assert first["cost_per_million_total_tokens"] == pytest.approx(3.6 / ((440 + 400) * 3600) * 1e6)
    table = invoke("rank", "llm", "--db", url)
    # the title names every term a level was judged by: the latency threshold (end-to-end) and the file's SLO
    assert "llm: ranked within p95 <= 5000 ms, TTFT p95 <= 100 ms, ITL p95 <= 20 ms, error rate <= 1.00%" in table
    for label in ("goodput/s", "out tok/s", "TTFT p95", "ITL p95", "per M out tok"):
        assert label in table
    assert "MaxInvocations/min" not in table


def test_a_looser_slo_on_the_command_line_keeps_the_file_s_slo(url) -> None:
    """The CLI's overrides change the latency threshold and the error limit; the SLO terms stay the file's."""
    ranked = json.loads(invoke("rank", "llm", "--db", url, "--json", "--latency-threshold-ms", "4000"))["ranked"]
    assert [round(r["invocations_per_minute"]) for r in ranked] == [40 * 60, 30 * 60]


def test_the_report_shows_the_generative_columns_in_markdown_and_csv(url) -> None:
    markdown = invoke("report", "llm", "--db", url)
    assert "goodput (requests/s)" in markdown and "TTFT p95 (ms)" in markdown
    assert "cost per million output tokens (USD)" in markdown
    assert "**SLO**: TTFT p95 &lt;= 100 ms, ITL p95 &lt;= 20 ms" in markdown
    assert "sustains a goodput of 2,400 requests per minute per instance within the SLO (40.00/s)" in markdown
    assert "invocations per minute per instance" not in markdown.split("## Ranked configurations")[1]
    html = invoke("report", "llm", "--db", url, "--format", "html")
    assert "goodput (requests/s)" in html and "ITL p95 (ms)" in html
    rows = list(csv.DictReader(io.StringIO(invoke("report", "llm", "--db", url, "--format", "csv"))))
    first = rows[0]
    assert first["configuration"] == "pt-nodb-ig1-mbs8"
    assert float(first["ITL p90 (ms)"]) == pytest.approx(15.0) and first["ITL p99 (ms)"] == ""  # p99: 100 a window
    assert float(first["output tokens per second per instance"]) == pytest.approx(440.0)
    assert float(first["goodput (requests/s)"]) == pytest.approx(40.0)


def test_the_mlflow_records_carry_the_generative_figures_with_their_intervals(url) -> None:
    from recommender.review import recommend_from_store
    from recommender.tracking.records import candidate_records

    store = ResultStore.open(url)
    rec, _, results = recommend_from_store(store, "llm")
    first = candidate_records(rec, results, store.window_records)[0]
    assert first.name == "pt-nodb-ig1-mbs8"
    assert first.metrics["goodput"] == pytest.approx(40.0)
    assert first.metrics["output_tokens_per_second"] == pytest.approx(440.0)
    assert first.metrics["itl_p95"] == pytest.approx(15.0)
    assert first.metrics["ttft_p95_low"] <= first.metrics["ttft_p95"] <= first.metrics["ttft_p95_high"]
    assert first.metrics["cost_per_million_output_tokens"] == pytest.approx(3.6 / (440 * 3600) * 1e6)
    assert first.series["window_output_tokens_per_second"][-1] == pytest.approx(440.0)


def test_the_dashboard_curve_has_a_point_per_level_and_marks_the_slo_frontier(url) -> None:
    from dashboard import charts, frames
    from recommender.metrics.limits import Limits

    store = ResultStore.open(url)
    spec = ExperimentSpec.model_validate(SPEC)
    results = store.results("llm", "current")
    levels = frames.generation_levels(results, store.window_records, Limits.from_spec(spec))
    by = {(r["configuration"], r["load"]): r for r in levels.to_dict("records")}
    assert len(by) == 4
    assert by[("pt-nodb-ig2-mbs8", 2.0)]["meets SLO"] is False  # ITL 30 ms over the 20 ms SLO
    assert by[("pt-nodb-ig1-mbs8", 2.0)]["output tokens/s per instance"] == pytest.approx(440.0)
    chart = charts.generation_curve(levels).to_dict()
    rule = chart["layer"][2]
    assert rule["mark"]["type"] == "rule"
    # the frontier: the highest instance throughput within the SLO (ig1 at 40 requests/s, not ig2's 60)
    assert chart["datasets"][rule["data"]["name"]][0]["output tokens/s per instance"] == pytest.approx(440.0)


def test_the_dashboard_ranking_and_curves_pages_show_a_generative_experiment(url, monkeypatch) -> None:
    from tests.unit.test_dashboard_pages import assert_clean, open_page

    at = open_page(url, "ranking", monkeypatch, experiment="llm")
    assert_clean(at)
    assert ("goodput (req/s)", "40.00") in [(m.label, m.value) for m in at.metric]
    frame = at.dataframe[0].value
    assert frame["goodput"].iloc[0] == pytest.approx(40.0)
    at = open_page(url, "curves", monkeypatch, experiment="llm")
    assert_clean(at)
    assert any("tokens/s per user" in s.value for s in at.subheader)
