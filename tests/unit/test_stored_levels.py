"""A stored run's records cut into one part per level and repeat, each with the load it offered, warm-up left out,
ordered by load (what `recommender export --format aiperf` writes as one AIPerf folder each)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from recommender.candidates import expand_candidates
from recommender.errors import RecommenderError
from recommender.importers.aiperf import CONCURRENCY, RATE, Load, aiperf_url, read_aiperf, write_aiperf
from recommender.job.stored_levels import stored_levels
from recommender.load.result import PLAN_FILE, SENT_TO_FILE, LoadResult
from recommender.load.runner import LoadRequest, _prepare
from recommender.load.shapes import compile_traffic
from recommender.metrics.records import TIMELINE_DTYPES, RequestLog, Timeline
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

STARTED = 1_795_000_000.0


def spec_of(traffic: dict[str, Any]) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "levels",
            "target": {"kind": "remote", "protocol": "openai", "model": "m", "endpoint": "http://127.0.0.1:1"},
            "traffic": {**traffic, "warmup_seconds": 5, "window_seconds": 5, "until_known": False},
            "correctness": "off",
        }
    )


def stored(tmp_path: Path, spec: ExperimentSpec) -> tuple[ResultStore, ExperimentSpec, int]:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'r.db'}")
    run_id = store.save_imported_run(spec, expand_candidates(spec)[0], "p", str(tmp_path / "run"), "test")
    assert run_id is not None
    return store, spec, run_id


def write_run(folder: Path, t_s: np.ndarray, users: np.ndarray, plan_json: str | None) -> None:
    folder.mkdir(parents=True)
    log = RequestLog(t_s, np.full(len(t_s), 1000), np.ones(len(t_s), dtype=bool), users)
    empty = Timeline(**{name: np.zeros(0) for name in TIMELINE_DTYPES})
    LoadResult(log, empty, STARTED, float(t_s.max()) + 0.5).to_npz(folder / "load.npz")
    if plan_json is not None:
        (folder / PLAN_FILE).write_text(plan_json)


def test_a_whole_plan_run_is_cut_at_its_levels_lowest_load_first_warm_up_left_out(tmp_path: Path) -> None:
    spec = spec_of({"concurrency": {"users": [4, 2], "duration_seconds": 20}})
    t_s = np.arange(0, 40, 0.5)  # 40 sends a level, one every 0.5 s
    write_run(tmp_path / "run" / "load", t_s, np.where(t_s < 20, 4, 2), None)  # measured before plans were kept
    levels = stored_levels(*stored(tmp_path, spec))
    assert [(level.load, level.repeat) for level in levels] == [(Load(CONCURRENCY, 2), 1), (Load(CONCURRENCY, 4), 1)]
    assert [len(level.records) for level in levels] == [30, 30]  # each level's first 5 s (10 sends) left out
    assert [level.started_at - STARTED for level in levels] == [25.0, 5.0]
    assert all(level.records.t_s[0] == 0 and set(level.records.users) == {level.load.value} for level in levels)


def test_level_runs_of_two_repeats_keep_their_rate_and_go_by_load_not_folder(tmp_path: Path) -> None:
    spec = spec_of({"rate": {"requests_per_second": [20, 5], "duration_seconds": 10, "arrival": "poisson"}})
    plan = compile_traffic(spec.traffic)
    for repeat in (1, 2):
        for index, level in enumerate(plan.levels, start=1):
            one = json.loads(plan.to_json()) | {"levels": [json.loads(plan.to_json())["levels"][index - 1]]}
            t_s = np.arange(0, 10, 1 / level.rate)  # type: ignore[operator]
            write_run(
                tmp_path / "run" / f"repeat-{repeat}" / f"level-{index}", t_s, np.full(len(t_s), 64), json.dumps(one)
            )
    levels = stored_levels(*stored(tmp_path, spec))
    assert [(level.load.label, level.repeat) for level in levels] == [
        ("rate 5/s", 1),
        ("rate 5/s", 2),
        ("rate 20/s", 1),
        ("rate 20/s", 2),
    ]
    assert [len(level.records) for level in levels] == [25, 25, 100, 100]  # 10 s less the 5 s warm-up
    assert {level.load.arrival for level in levels} == {"poisson"}


def test_an_exported_rate_level_says_its_rate_not_a_concurrency(tmp_path: Path) -> None:
    log = RequestLog(np.arange(10) / 5, np.full(10, 2000), np.ones(10, dtype=bool), np.full(10, 64))
    write_aiperf(tmp_path, log, STARTED, "m", "http://127.0.0.1:1", Load(RATE, 5.0, "poisson"), "embeddings")
    aggregate = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    assert aggregate["input_config"]["phases"] == [
        {"name": "profiling", "kind": "profiling", "type": "poisson", "rate": 5.0}
    ]
    with pytest.raises(RecommenderError, match="found 'poisson'"):  # and an open-loop run is not imported back
        read_aiperf(tmp_path)


def test_a_level_run_without_its_plan_is_refused_naming_the_file(tmp_path: Path) -> None:
    spec = spec_of({"concurrency": {"users": [4, 2], "duration_seconds": 20}})
    write_run(tmp_path / "run" / "level-2", np.arange(0, 20, 0.5), np.full(40, 2), None)
    with pytest.raises(RecommenderError, match=r"level-2/load.npz: a load run of one level, measured before"):
        stored_levels(*stored(tmp_path, spec))


def test_where_a_run_sent_its_requests_is_kept_beside_them_and_named_in_the_aiperf_export(tmp_path: Path) -> None:
    """A local server's port is chosen per run: the load run keeps its URL (load/runner.py), the export names it as
    AIPerf's base URL; a run that kept none leaves `urls` out, never `[""]`."""
    spec = spec_of({"concurrency": {"users": [2], "duration_seconds": 20}})
    request = LoadRequest(
        "http://user:secret@127.0.0.1:40123",
        "model",
        [{"model": "model", "messages": []}],
        compile_traffic(spec.traffic),
        tmp_path / "prepared",
        path="/v1/chat/completions",
    )
    _prepare(request)  # what a load run writes before its child starts, beside where its records go
    write_run(tmp_path / "run" / "load", np.arange(0, 20, 0.5), np.full(40, 2), None)
    (tmp_path / "prepared" / SENT_TO_FILE).replace(tmp_path / "run" / "load" / SENT_TO_FILE)
    (level,) = stored_levels(*stored(tmp_path, spec))
    assert level.sent_to == "http://user:***@127.0.0.1:40123/v1/chat/completions"  # no credential kept
    assert aiperf_url(level.sent_to, "chat") == "http://user:***@127.0.0.1:40123/v1"
    assert aiperf_url("http://127.0.0.1:1/v2/models/m/infer", "embeddings") == "http://127.0.0.1:1/v2/models/m/infer"

    log = RequestLog(np.arange(10) / 5, np.full(10, 2000), np.ones(10, dtype=bool), np.full(10, 2))
    write_aiperf(tmp_path / "named", log, STARTED, "m", "http://127.0.0.1:40123/v1", Load(CONCURRENCY, 2), "embeddings")
    named = json.loads((tmp_path / "named" / "profile_export_aiperf.json").read_text())
    assert named["input_config"]["endpoint"]["urls"] == ["http://127.0.0.1:40123/v1"]
    write_aiperf(tmp_path / "unknown", log, STARTED, "m", None, Load(CONCURRENCY, 2), "embeddings")
    unknown = json.loads((tmp_path / "unknown" / "profile_export_aiperf.json").read_text())
    assert "urls" not in unknown["input_config"]["endpoint"] and unknown["input_config"]["endpoint"]["type"]
