"""Every dashboard page, run with Streamlit's AppTest against the seeded fixture DB, an empty DB and edge cases."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from streamlit.dataframe_util import convert_arrow_bytes_to_pandas_df
from streamlit.testing.v1 import AppTest

from recommender.candidates import expand_candidates
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.steady import Window
from recommender.metrics.summary import PhaseSummary, WindowStats
from recommender.report.columns import MAX_INVOCATIONS
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")
SEED = ROOT / "tests" / "data" / "dashboard_seed.db"
PAGES = ("experiments", "ranking", "compare", "curves", "cost", "history", "report")


@pytest.fixture
def seeded_url(tmp_path) -> str:
    copy = tmp_path / "seed.db"
    shutil.copy(SEED, copy)
    return f"sqlite:///{copy}"


@pytest.fixture
def empty_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    ResultStore.open(url)  # made and migrated, as a run that has not stored a result yet leaves it
    return url


def open_page(url: str, page: str, monkeypatch, experiment: str | None = None) -> AppTest:
    monkeypatch.setenv("RECOMMENDER_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    if experiment is not None:
        at.sidebar.selectbox(key="experiment").set_value(experiment).run()
    return at.switch_page(f"views/{page}.py").run()


def assert_clean(at: AppTest) -> None:
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def charts(at: AppTest) -> list:
    return [e for e in _leaves(at.main) if getattr(e, "type", "") == "vega_lite_chart"]


def _leaves(node):
    for child in getattr(node, "children", {}).values():
        yield child
        yield from _leaves(child)


def texts(at: AppTest) -> str:
    parts = [e.value for kind in (at.info, at.warning, at.markdown, at.caption, at.title, at.subheader) for e in kind]
    return "\n".join(str(p) for p in parts)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders_the_seeded_db_without_errors(page, seeded_url, monkeypatch):
    at = open_page(seeded_url, page, monkeypatch)
    assert_clean(at)
    assert at.title[0].value.lower() == page


@pytest.mark.parametrize("page", PAGES)
def test_every_page_explains_an_empty_db(page, empty_url, monkeypatch):
    at = open_page(empty_url, page, monkeypatch)
    assert_clean(at)
    assert "No experiments" in texts(at)


def test_experiments_lists_both_experiments_with_counts(seeded_url, monkeypatch):
    at = open_page(seeded_url, "experiments", monkeypatch, experiment="micro")
    overview = at.dataframe[0].value.set_index("experiment")
    assert set(overview.index) == {"micro", "micro-rerun"}
    assert overview.loc["micro", ["ok", "failed", "skipped"]].tolist() == [4, 0, 2]
    candidates = at.dataframe[1].value
    skipped = candidates[candidates["status"] == "skipped"]
    assert skipped["reason"].str.contains("TensorRT needs an NVIDIA GPU").all()


def test_compare_shows_figures_and_only_the_settings_that_differ(seeded_url, monkeypatch):
    at = open_page(seeded_url, "compare", monkeypatch, experiment="micro")
    assert_clean(at)
    figures, levels, difference = (frame.value for frame in at.dataframe)
    assert list(figures.columns) == ["pt-nodb-ig1-mbs4", "pt-db-ig1-mbs4"]
    assert "invocations/min" in figures.index and "stability" in figures.index
    assert set(levels["configuration"]) == {"pt-nodb-ig1-mbs4", "pt-db-ig1-mbs4"}
    assert {"windows (n)", "SE IPM", "slope t IPM", "stable", "repeats breached"} <= set(levels.columns)
    assert any("Stability rule: a level is stable when" in c.value for c in at.caption)
    assert list(difference.index) == ["dynamic_batching"]


def test_curves_draws_four_charts_for_the_measured_candidates(seeded_url, monkeypatch):
    at = open_page(seeded_url, "curves", monkeypatch, experiment="micro")
    assert_clean(at)
    assert len(charts(at)) == 4
    assert at.multiselect[0].value == ["pt-nodb-ig1-mbs4", "pt-db-ig1-mbs4", "onnx-nodb-ig1-mbs4", "onnx-db-ig1-mbs4"]


def test_history_follows_one_configuration_across_experiments(seeded_url, monkeypatch):
    at = open_page(seeded_url, "history", monkeypatch, experiment="micro")
    onnx = next(o for o in at.selectbox(key="history:micro").options if o.startswith("onnx-db"))
    at.selectbox(key="history:micro").set_value(onnx).run()
    assert_clean(at)
    assert at.dataframe[0].value["experiment"].tolist() == ["micro", "micro-rerun"]
    assert len(charts(at)) == 2


def add_failed_and_running(url: str) -> None:
    """A second experiment left running, with one failed candidate (reason with Markdown/HTML) and one pending."""
    store = ResultStore.open(url)
    spec = ExperimentSpec.model_validate(
        {
            "name": "live",
            "description": "<b>bold</b> **not markdown**",
            "variants": {"optimizations": ["pt", "onnx"], "dynamic_batching": [False]},
        }
    )
    experiment_id = store.save_experiment(spec)
    failed, pending = expand_candidates(spec)
    run_id = store.start_run(store.save_candidate(experiment_id, failed), "proto", None)
    store.finish_run(run_id, "failed", reason="tritonserver exited: <script>alert(1)</script>\nsecond line")
    store.save_candidate(experiment_id, pending)


@pytest.mark.parametrize("page", PAGES)
def test_a_running_experiment_with_a_failed_run_gets_text_not_a_traceback(page, seeded_url, monkeypatch):
    add_failed_and_running(seeded_url)
    at = open_page(seeded_url, page, monkeypatch, experiment="live")
    assert_clean(at)
    assert texts(at)


def test_failed_reason_is_shown_as_code_not_markup(seeded_url, monkeypatch):
    add_failed_and_running(seeded_url)
    at = open_page(seeded_url, "experiments", monkeypatch, experiment="live")
    assert "still running" in texts(at)
    assert any("<script>alert(1)</script>" in c.value for c in at.code)
    assert all("<script>" not in m.value for m in at.markdown)


def test_curves_mark_the_stored_steady_state_windows(seeded_url, monkeypatch):
    at = open_page(seeded_url, "curves", monkeypatch, experiment="micro")
    throughput = charts(at)[0].proto.spec
    assert '"unstable"' in throughput and "steady-state window" in throughput
    assert not any("No steady-state windows" in c.value for c in at.caption)


def test_an_unreachable_database_gets_the_store_error_and_its_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("RECOMMENDER_DB_URL", f"sqlite:///{tmp_path / 'missing-folder' / 'results.db'}")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert "cannot open results database" in at.error[0].value
    assert at.info  # the hint


def test_a_missing_database_file_is_said_and_not_made(tmp_path, monkeypatch):
    missing = tmp_path / "results.db"
    monkeypatch.setenv("RECOMMENDER_DB_URL", f"sqlite:///{missing}")
    at = AppTest.from_file(APP, default_timeout=60).run()
    assert not at.exception
    assert f"no results database at {missing}" in at.error[0].value.replace("\\", "")  # markdown-escaped
    assert "recommender run FILE" in at.info[0].value
    assert not missing.exists()


def test_the_ranking_page_shows_the_instance_type_column_and_facet(tmp_path, monkeypatch) -> None:
    from recommender.job.protocol import protocol_fingerprint

    url = f"sqlite:///{tmp_path / 'multi.db'}"
    spec = ExperimentSpec.model_validate(
        {
            "name": "sizes",
            "variants": {
                "optimizations": ["onnx"],
                "dynamic_batching": [False],
                "instance_group_counts": [1],
                "max_batch_sizes": [4],
            },
            "targets": [{"instance_type": t, "priced_as": t} for t in ("ml.g4dn.xlarge", "ml.g4dn.2xlarge")],
        }
    )
    store = ResultStore.open(url)
    experiment_id = store.save_experiment(spec, status="done")
    for index, candidate in enumerate(expand_candidates(spec)):
        protocol = protocol_fingerprint(spec, target=spec.all_targets[index])
        run_id = store.start_run(store.save_candidate(experiment_id, candidate), protocol, None)
        store.finish_run(
            run_id,
            "ok",
            headline=Headline(
                invocations_per_minute=600.0 * (index + 1),
                max_invocations=600.0,
                model_latency_ms=10.0,
                latency_ms={"p95": 10.0},
                within_threshold=True,
            ),
        )
    at = open_page(url, "ranking", monkeypatch, experiment="sizes")
    assert_clean(at)
    facet = at.multiselect(key="ranking-instance-types")
    assert sorted(facet.value) == ["ml.g4dn.2xlarge", "ml.g4dn.xlarge"]
    frame = at.dataframe[0].value
    assert sorted(frame["instance_type"]) == ["ml.g4dn.2xlarge", "ml.g4dn.xlarge"]
    at = facet.set_value(["ml.g4dn.2xlarge"]).run()
    assert list(at.dataframe[0].value["instance_type"]) == ["ml.g4dn.2xlarge"]


def chart_data(chart) -> pd.DataFrame:
    """The rows a Vega-Lite chart element draws (its one named data set, as Streamlit sends it)."""
    (dataset,) = chart.proto.datasets
    return convert_arrow_bytes_to_pandas_df(dataset.data.data)


# (repeat, phase) -> the two windows' (IPM, p95 ms); the first repeat's phase summaries say something else
REPEATS = {(0, 0): ((600, 10), (660, 12)), (1, 0): ((540, 20), (600, 22)), (0, 1): ((1200, 30), (1260, 34))}
REPEATS |= {(1, 1): ((1080, 50), (1140, 54))}
FIRST_REPEAT_PHASES = ((630, 11.9), (1230, 33.5))  # pooled over the first repeat's requests only


def stats(ipm: float, p95: float, start: float) -> WindowStats:
    latency = {"p50": p95 / 2, "p90": p95 * 0.9, "p95": p95, "p99": p95 * 1.2}
    return WindowStats(start, start + 5, 200, 200, 0, ipm, latency, 1, 1)


PRUNED_REASON = "pruned: its interval is below the leader's"


def add_two_repeats(url: str) -> None:
    """Two candidates raced: one measured over two repeats of two load levels (windows and the first repeat's phase
    summaries), one measured briefly and pruned with its partial figures."""
    spec = ExperimentSpec.model_validate(
        {
            "name": "repeats",
            "variants": {
                "optimizations": ["onnx"],
                "dynamic_batching": [False],
                "instance_group_counts": [1],
                "max_batch_sizes": [4, 8],
            },
        }
    )
    store = ResultStore.open(url)
    experiment_id = store.save_experiment(spec, status="done")
    measured, pruned = (store.save_candidate(experiment_id, c) for c in expand_candidates(spec))
    run_id = store.start_run(measured, "proto", None)
    windows = [
        (repeat, Window(phase, index, stats(ipm, p95, 10.0 * phase + 5 * index), load=phase + 1.0))
        for (repeat, phase), figures in REPEATS.items()
        for index, (ipm, p95) in enumerate(figures)
    ]
    phases = [
        PhaseSummary(i, stats(ipm, p95, 10.0 * i), 10.0 * i, 10.0 * i + 10)
        for i, (ipm, p95) in enumerate(FIRST_REPEAT_PHASES)
    ]
    series = [stats(600, 10, second) for second in range(20)]
    headline = Headline(invocations_per_minute=1170.0, latency_ms={"p95": 42.0}, within_threshold=True, repeats=2)
    store.finish_run(run_id, "ok", headline=headline, phases=phases, series=series, windows=windows)
    brief = Headline(
        invocations_per_minute=812.3456,
        max_invocations=812.3456,
        ipm_interval=Interval(812.3456, 790.1234, 834.5678, 4, "windows"),
        latency_ms={"p95": 30.0},
        within_threshold=True,
    )
    store.finish_run(store.start_run(pruned, "proto", None), "ok", headline=brief)
    store.prune(pruned, "proto", PRUNED_REASON)


def test_the_frontier_plots_each_level_over_every_repeat_labelled_as_the_mean_of_window_percentiles(
    seeded_url, monkeypatch
):
    add_two_repeats(seeded_url)
    at = open_page(seeded_url, "curves", monkeypatch, experiment="repeats")
    assert_clean(at)
    frontier = charts(at)[2]  # after the throughput and latency charts (no server or GPU figures stored here)
    spec = json.loads(frontier.proto.spec)
    x, y = spec["encoding"]["x"], spec["encoding"]["y"]
    points = chart_data(frontier)[[x["field"], y["field"]]].itertuples(index=False)
    assert sorted(map(tuple, points)) == [(600.0, 16.0), (1170.0, 42.0)]  # level means, both repeats
    assert "mean of window p95s" in y["title"]
    assert "every repeat" in x["title"]


@pytest.mark.parametrize("page", ("experiments", "ranking", "compare", "cost", "history", "search"))
def test_every_table_shows_a_missing_value_as_a_dash_as_the_cli_does(page, seeded_url, monkeypatch):
    at = open_page(seeded_url, page, monkeypatch, experiment="micro")
    assert_clean(at)
    assert at.dataframe
    assert [table.proto.placeholder for table in at.dataframe] == ["-"] * len(at.dataframe)


def test_the_ranking_shows_a_pruned_candidate_with_dashes_for_the_rank_and_instances_it_has_not(
    seeded_url, monkeypatch
):
    add_two_repeats(seeded_url)
    at = open_page(seeded_url, "ranking", monkeypatch, experiment="repeats")
    assert_clean(at)
    (table,) = at.dataframe
    pruned = table.value.set_index("name").loc["onnx-nodb-ig1-mbs8"]
    assert pruned[["rank", "initial_instance_count"]].isna().all()  # missing, not a figure ...
    assert table.proto.placeholder == "-"  # ... shown as the CLI's '-', never as Python's None


def test_the_search_page_prints_its_figures_in_the_catalog_format(seeded_url, monkeypatch):
    add_two_repeats(seeded_url)
    at = open_page(seeded_url, "search", monkeypatch, experiment="repeats")
    assert_clean(at)
    (table,) = at.dataframe
    assert table.value.set_index("configuration").loc["onnx-nodb-ig1-mbs8", "MaxInvocations"] == 812.3456
    configured = json.loads(table.proto.columns)
    formats = {name: c.get("type_config", {}).get("format") for name, c in configured.items() if name != "_index"}
    figure = f"%.{MAX_INVOCATIONS.digits}f"
    assert formats == {
        "MaxInvocations": figure,
        "interval low": figure,
        "interval high": figure,
        "level": "%g",
        "duration (s)": "%.1f",
    }
    points = json.loads(charts(at)[0].proto.spec)["layer"][1]["encoding"]
    assert points["x"]["axis"] == {"format": "d", "tickMinStep": 1}  # step 1, 2, ...: never 0.1, 0.2, ...
    tooltip = points["tooltip"]
    assert {t["field"]: t.get("format") for t in tooltip}["MaxInvocations"] == f",.{MAX_INVOCATIONS.digits}f"


def test_the_experiment_page_shows_where_the_time_went(seeded_url, monkeypatch):
    """Runs that kept their stage times (issue 24 item 3): the page sums them per stage, a bar and a row each; the
    seeded runs predate stage timing, so one is given stages here."""
    import json
    import sqlite3

    path = seeded_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        run_id, stats = db.execute(
            "SELECT r.id, r.server_stats FROM runs r JOIN candidates c ON r.candidate_id = c.id "
            "JOIN experiments e ON c.experiment_id = e.id WHERE e.name = 'micro' AND r.status = 'ok' LIMIT 1"
        ).fetchone()
        stages = {"export": 4.0, "deploy": 6.0, "load": 30.0}
        db.execute(
            "UPDATE runs SET server_stats = ? WHERE id = ?",
            (json.dumps(json.loads(stats or "{}") | {"stages": stages}), run_id),
        )
    at = open_page(seeded_url, "experiments", monkeypatch, experiment="micro")
    assert_clean(at)
    assert "Where the time went" in [s.value for s in at.subheader]
    table = at.dataframe[-1].value
    assert table["stage"].tolist() == ["export", "deploy", "load"] and table["seconds"].tolist() == [4.0, 6.0, 30.0]
    assert table["share"].tolist() == pytest.approx([0.1, 0.15, 0.75])
    assert len(charts(at)) == 1


def test_the_experiment_page_plots_the_payload_s_token_lengths(seeded_url, monkeypatch):
    """A run that stored its payload (migration 0008): the page says where the requests came from and plots their
    token-length histogram, a bar per range; the seeded runs predate it, so one is given a payload here."""
    import sqlite3

    from recommender.metrics.payload_lengths import payload_lengths

    ResultStore.open(seeded_url).engine.dispose()  # migrated to the newest revision: the runs have a payload column
    sent = payload_lengths("0123456789abcdef", "queries.jsonl", [9] * 10 + [14] * 15 + [40] * 5)
    with sqlite3.connect(seeded_url.removeprefix("sqlite:///")) as db:
        db.execute(
            "UPDATE runs SET payload = ? WHERE id = (SELECT r.id FROM runs r JOIN candidates c ON r.candidate_id = c.id"
            " JOIN experiments e ON c.experiment_id = e.id WHERE e.name = 'micro' AND r.status = 'ok' LIMIT 1)",
            (json.dumps(sent.to_dict()),),
        )
    at = open_page(seeded_url, "experiments", monkeypatch, experiment="micro")
    assert_clean(at)
    assert "Payload" in [s.value for s in at.subheader]
    assert "30 requests from queries" in texts(at) and "9 to 40, median 14" in texts(at)  # markdown escaped
    (chart,) = [c for c in charts(at) if "input tokens" in c.proto.spec]
    drawn = chart_data(chart)
    assert drawn["requests"].tolist() == [b.requests for b in sent.histogram] and drawn["requests"].sum() == 30


def test_the_ranking_card_and_the_cost_page_count_input_tokens_where_the_payload_was_recorded(tmp_path, monkeypatch):
    """Tokens as a unit on the dashboard: the card shows input tokens/s beside MaxInvocations, the cost page the cost
    per million input tokens beside the cost per million inferences (both from the stored payload's mean)."""
    from recommender.metrics.payload_lengths import payload_lengths

    url = f"sqlite:///{tmp_path / 'tokens.db'}"
    store = ResultStore.open(url)
    spec = ExperimentSpec.model_validate(
        {"name": "tokens", "variants": {"dynamic_batching": [False]}, "target": {"price_per_hour": 1.2}}
    )
    experiment_id = store.save_experiment(spec, status="done")
    (candidate,) = expand_candidates(spec)
    sent = payload_lengths("0123456789abcdef", "queries.jsonl", [10, 30])  # 20 input tokens per request
    run_id = store.start_run(store.save_candidate(experiment_id, candidate), "proto", None, payload=sent.to_dict())
    line = Headline(
        invocations_per_minute=600.0,
        max_invocations=600.0,
        model_latency_ms=20.0,
        latency_ms={"p95": 20.0},
        within_threshold=True,
    )
    store.finish_run(run_id, "ok", headline=line)
    at = open_page(url, "ranking", monkeypatch, experiment="tokens")
    assert_clean(at)
    assert ("Input tokens per instance", "200 /s") in [(m.label, m.value) for m in at.metric]  # 10 requests/s x 20
    at = open_page(url, "cost", monkeypatch, experiment="tokens")
    assert_clean(at)
    frame = at.dataframe[0].value
    assert frame["cost per million tokens (USD)"].iloc[0] == pytest.approx(frame["cost per million (USD)"].iloc[0] / 20)
