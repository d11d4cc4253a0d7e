"""Ranking, Cost and Report pages: the figures are recommender.decide.recommendation's and the report is `recommender
report`'s."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest
from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.decide.recommendation import recommend
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.review import recommend_from_store
from recommender.store.results import ResultStore

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
SEED = ROOT / "tests" / "data" / "dashboard_seed.db"


@pytest.fixture
def seeded_url(tmp_path, monkeypatch) -> str:
    copy = tmp_path / "seed.db"
    shutil.copy(SEED, copy)
    url = f"sqlite:///{copy}"
    monkeypatch.setenv("RECOMMENDER_DB_URL", url)
    return url


def page(name: str, experiment: str = "micro") -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60).run()
    at.sidebar.selectbox(key="experiment").set_value(experiment).run()
    at.switch_page(f"views/{name}.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_card_shows_the_recommendation_of_the_stored_settings(seeded_url):
    rec, _, _ = recommend_from_store(ResultStore.open(seeded_url), "micro")
    at = page("ranking")
    card = metrics(at)
    assert at.subheader[0].value == f"Recommended: {rec.winner.candidate.name}".replace("-", "\\-")
    assert card["Instance type"] == "local-cpu"
    assert card["Instances for 30,000/min"] == str(rec.fleet_size)
    assert card["Cost per hour"] == "unpriced"
    assert card["p95 latency at MaxInvocations"] == f"{rec.winner.candidate.model_latency_ms:,.1f} ms"


def test_table_lists_ranked_then_excluded_with_reasons(seeded_url):
    table = page("ranking").dataframe[0].value
    assert table["rank"].tolist()[:4] == [1, 2, 3, 4]
    excluded = table[table["rank"].isna()]
    assert sorted(excluded["name"]) == ["trt-db-ig1-mbs4", "trt-nodb-ig1-mbs4"]
    assert excluded["excluded_reasons"].str.startswith("skipped: TensorRT needs an NVIDIA GPU").all()


def test_a_tighter_threshold_excludes_the_slow_candidates_with_the_reason(seeded_url):
    results = ResultStore.open(seeded_url).results("micro")
    slow = {r.name for r in results if r.status == "ok" and r.headline.latency("p95") > 30}
    assert slow  # the fixture has candidates on both sides of 30 ms
    at = page("ranking")
    at.sidebar.number_input(key="setting:micro:threshold_ms").set_value(30.0).run()
    table = at.dataframe[0].value
    over = table[table["excluded_reasons"].str.contains("above the 30 ms threshold")]
    assert set(over["name"]) == slow
    assert set(table[table["rank"].notna()]["name"]).isdisjoint(slow)


def test_importance_changes_the_weights_and_survive_a_page_switch(seeded_url):
    at = page("ranking")
    at.sidebar.select_slider(key="setting:micro:latency").set_value("lowest").run()
    assert "latency 0%" in " ".join(c.value for c in at.caption)
    at.switch_page("views/compare.py").run()
    at.switch_page("views/ranking.py").run()
    assert at.sidebar.select_slider(key="setting:micro:latency").value == "lowest"


def test_no_candidate_within_limits_says_why(seeded_url):
    at = page("ranking")
    at.sidebar.number_input(key="setting:micro:threshold_ms").set_value(1.0).run()
    assert not at.exception
    assert any("No recommendation" in w.value for w in at.warning)


def test_cost_prices_the_measured_throughput_as_each_catalog_type(seeded_url):
    at = page("cost")
    table = at.dataframe[0].value
    assert set(table["instance type"]) == {"ml.c5.xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge"}
    store = ResultStore.open(seeded_url)
    _, spec, results = recommend_from_store(store, "micro")
    expected = recommend(
        results, spec.model_copy(update={"target": spec.target.model_copy(update={"priced_as": "ml.g5.xlarge"})})
    )
    row = table[(table["instance type"] == "ml.g5.xlarge") & table["recommended"]].iloc[0]
    assert row["configuration"] == expected.winner.candidate.name
    assert row["cost per million (USD)"] == pytest.approx(expected.winner.cost_per_million)
    assert row["fleet cost per hour (USD)"] == pytest.approx(expected.capacity.cost_per_hour)


def test_report_preview_is_the_cli_report(seeded_url):
    cli = CliRunner().invoke(build_app(), ["report", "micro", "--format", "md", "--db", seeded_url])
    assert cli.exit_code == 0, cli.output
    at = page("report")
    assert at.code[0].value == cli.output.rstrip("\n")  # st.code drops the final newline
    labels = [e.proto.label for e in _leaves(at.main) if getattr(e, "type", "") == "download_button"]
    assert labels == ["Download md", "Download html", "Download csv"]


def _leaves(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _leaves(child)


def test_overlapping_intervals_show_the_tie_notice(seeded_url):
    from recommender.candidates import expand_candidates
    from recommender.spec import ExperimentSpec

    store = ResultStore.open(seeded_url)
    spec = ExperimentSpec.model_validate(
        {"name": "noisy", "variants": {"optimizations": ["pt", "onnx"], "dynamic_batching": [False]}}
    )
    experiment_id = store.save_experiment(spec, status="done")
    for candidate, ipm, latency in zip(expand_candidates(spec), (1000.0, 990.0), (20.0, 21.0), strict=False):
        run_id = store.start_run(store.save_candidate(experiment_id, candidate), "proto", None)
        headline = Headline(
            invocations_per_minute=ipm,
            latency_ms={"p95": latency},
            within_threshold=True,
            stable=True,
            ipm_interval=Interval(1000.0, 950.0, 1050.0, 3),
            latency_interval=Interval(20.5, 18.0, 23.0, 3),
        )
        store.finish_run(run_id, "ok", headline=headline)
    at = page("ranking", experiment="noisy")
    assert any("indistinguishable" in w.value for w in at.warning)
    notes = at.dataframe[0].value.set_index("name")["notes"]
    assert "tied with winner" in notes.iloc[1]


def test_the_limits_in_the_sidebar_re_decide_the_whole_decision_as_rank_does(seeded_url):
    at = page("ranking")
    at.sidebar.number_input(key="setting:micro:threshold_ms").set_value(30.0).run()
    at.sidebar.number_input(key="setting:micro:max_error_rate").set_value(0.0).run()
    rec, _, _ = recommend_from_store(ResultStore.open(seeded_url), "micro", threshold_ms=30.0, max_error_rate=0.0)
    table = at.dataframe[0].value
    ranked = table[table["rank"].notna()]
    assert ranked["name"].tolist() == [r.candidate.name for r in rec.ranking.ranked]
    assert ranked["invocations_per_minute"].tolist() == pytest.approx(
        [r.candidate.invocations_per_minute for r in rec.ranking.ranked]
    )  # MaxInvocations re-decided, not as stored
