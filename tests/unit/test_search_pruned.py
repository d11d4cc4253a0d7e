"""The `pruned` status through the store, the search-path frame and the dashboard's Search page."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from dashboard.search_path import search_path
from recommender.candidates import expand_candidates
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

ROOT = Path(__file__).resolve().parents[2]
APP = str(ROOT / "dashboard" / "app.py")


@pytest.fixture
def pruned_url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'search.db'}"
    store = ResultStore.open(url)
    spec = ExperimentSpec.model_validate(
        {
            "name": "raced",
            "search": "adaptive",
            "variants": {"instance_group_counts": [1, 2], "dynamic_batching": [True]},
        }
    )
    experiment = store.save_experiment(spec)
    for count, candidate in enumerate(expand_candidates(spec), start=1):
        ipm = 1000.0 * count
        cid = store.save_candidate(experiment, candidate)
        run = store.start_run(cid, "p1", None)
        store.finish_run(
            run,
            "ok",
            headline=Headline(
                max_invocations=ipm,
                invocations_per_minute=ipm,
                repeats=1,
                ipm_interval=Interval(ipm, ipm - 50, ipm + 50, 4, "windows"),
            ),
        )
        if count == 1:
            store.prune(cid, "p1", "pruned by racing: below the leader")
    return url


def test_a_pruned_run_keeps_its_figures_and_reason_and_comes_first_in_the_search_path(pruned_url):
    store = ResultStore.open(pruned_url)
    results = {r.name: r for r in store.results("raced", "p1")}
    pruned = results["pt-db-ig1-mbs8"]
    assert pruned.status == "pruned" and pruned.reason == "pruned by racing: below the leader"
    assert pruned.headline.max_invocations == 1000.0
    path = search_path(store.history("raced"), "p1")
    assert path["configuration"].tolist() == ["pt-db-ig1-mbs8", "pt-db-ig2-mbs8"]
    assert path["status"].tolist() == ["pruned", "ok"] and path["interval low"].tolist() == [950.0, 1950.0]


def test_a_pruned_run_is_final_so_a_resumed_search_does_not_probe_it_again(pruned_url):
    store = ResultStore.open(pruned_url)
    assert store.final_run(1, "p1").status == "pruned"


def test_search_page_draws_the_path_and_names_the_pruned(pruned_url, monkeypatch):
    monkeypatch.setenv("RECOMMENDER_DB_URL", pruned_url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at = at.switch_page("views/search.py").run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert table.loc[table["status"] == "pruned", "reason"].tolist() == ["pruned by racing: below the leader"]
    assert "pruned: 1" in " ".join(c.value for c in at.caption)


def test_search_page_on_the_seeded_grid_db_lists_every_run(tmp_path, monkeypatch):
    copy = tmp_path / "seed.db"
    shutil.copy(ROOT / "tests" / "data" / "dashboard_seed.db", copy)
    monkeypatch.setenv("RECOMMENDER_DB_URL", f"sqlite:///{copy}")
    at = AppTest.from_file(APP, default_timeout=60).run().switch_page("views/search.py").run()
    assert not at.exception and not at.error
    assert "search: grid" in " ".join(c.value for c in at.caption)


def test_a_candidate_pruned_by_the_grids_structure_is_stored_without_figures_and_shown(pruned_url, monkeypatch):
    store = ResultStore.open(pruned_url)
    spec = ExperimentSpec.model_validate(
        {
            "name": "raced",
            "search": "adaptive",
            "variants": {"instance_group_counts": [1, 2, 3], "dynamic_batching": [True]},
        }
    )
    experiment = store.save_experiment(spec)
    ig3 = expand_candidates(spec)[2]
    cid = store.save_candidate(experiment, ig3)
    reason = "pruned by the grid's structure, not probed: along instance count (taken as unimodal) ..."
    store.prune(cid, "p1", reason)  # never measured: no run to mark, so one is stored
    result = {r.name: r for r in store.results("raced", "p1")}["pt-db-ig3-mbs8"]
    assert (result.status, result.reason, result.headline) == ("pruned", reason, None)
    assert store.final_run(cid, "p1").status == "pruned"  # final: a resumed search does not deploy it
    store.prune(cid, "p1", reason)  # a resumed search prunes it again: still one run
    assert len([r for r in store.history("raced") if r.name == "pt-db-ig3-mbs8"]) == 1
    path = search_path(store.history("raced"), "p1")
    assert "pt-db-ig3-mbs8" in path["configuration"].tolist()
    monkeypatch.setenv("RECOMMENDER_DB_URL", pruned_url)
    at = AppTest.from_file(APP, default_timeout=60).run()
    at = at.switch_page("views/search.py").run()
    assert not at.exception and not at.error
    assert "pruned: 2" in " ".join(c.value for c in at.caption)
