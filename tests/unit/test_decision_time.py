"""Decide at decision time: stored windows re-decided under other limits by rank / report / review, one protocol
read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recommender.candidates import expand_candidates
from recommender.cli import build_app
from recommender.metrics.headline import Headline
from recommender.metrics.steady import Window
from recommender.metrics.summary import WindowStats
from recommender.review import recommend_from_store
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

SPEC = {
    "name": "levels",
    "variants": {"dynamic_batching": [False], "instance_group_counts": [1, 2]},
    "latency_threshold": {"percentile": "p95", "ms": 500},
    "target": {"price_per_hour": 1.0},
}
# candidate -> per level (load, ipm, p95 ms, errors of 200): ig1 is fast at low load, ig2 carries more load slowly
LEVELS = {
    "pt-nodb-ig1-mbs8": [(1, 600, 20, 0), (2, 900, 60, 0), (4, 1000, 400, 4)],
    "pt-nodb-ig2-mbs8": [(1, 500, 30, 0), (2, 950, 45, 0), (4, 1400, 450, 0)],
}
WOBBLE = (1.0, 1.01, 0.99, 1.005)


def windows(levels: list[tuple[float, float, float, int]], repeats: int = 3) -> list[tuple[int, Window]]:
    out = []
    for repeat in range(repeats):
        for phase, (load, ipm, p95, errors) in enumerate(levels):
            for index, wobble in enumerate(WOBBLE):
                stats = WindowStats(
                    phase * 20 + index * 5.0,
                    phase * 20 + index * 5.0 + 5,
                    200,
                    200 - errors,
                    errors,
                    ipm * wobble,
                    {"p50": p95 / 2, "p90": p95 * 0.9, "p95": p95, "p99": None},
                )
                server = {"queue_us": 1000.0 * (phase + 1)}  # each level's own server figure: 1000, 2000, 3000 us
                out.append((repeat, Window(phase, index, stats, load, server=server)))
    return out


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store, spec = ResultStore.open(url), ExperimentSpec.model_validate(SPEC)
    experiment_id = store.save_experiment(spec, status="done")
    for candidate in expand_candidates(spec):
        candidate_id = store.save_candidate(experiment_id, candidate)
        old = store.start_run(candidate_id, "old-protocol", None)  # an older protocol's figures: history only
        store.finish_run(
            old,
            "ok",
            headline=Headline(
                invocations_per_minute=99_999.0, within_threshold=True, max_invocations=99_999.0, repeats=3
            ),
        )
        run_id = store.start_run(candidate_id, "current", None)
        store.finish_run(run_id, "ok", headline=Headline(repeats=3), windows=windows(LEVELS[candidate.name]))
    return url


def figures(url: str, **limits) -> dict[str, tuple]:
    _rec, _, results = recommend_from_store(ResultStore.open(url), "levels", **limits)
    return {r.name: (r.headline.within_threshold, r.headline.level_load, r.headline.ipm_interval.n) for r in results}


def test_reads_take_the_current_protocol_only(url):
    store = ResultStore.open(url)
    assert store.current_protocol("levels") == "current"
    rec, _, results = recommend_from_store(store, "levels")
    assert {r.protocol_key for r in results} == {"current"}
    assert all(r.invocations_per_minute < 99_999 for r in (x.candidate for x in rec.ranking.ranked))
    assert [r.protocol_key for r in store.history("levels")] == ["old-protocol", "current"] * 2


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({}, {"pt-nodb-ig1-mbs8": (True, 2, 3), "pt-nodb-ig2-mbs8": (True, 4, 3)}),  # ig1's top level: 2 % errors
        ({"max_error_rate": 0.05}, {"pt-nodb-ig1-mbs8": (True, 4, 3), "pt-nodb-ig2-mbs8": (True, 4, 3)}),
        ({"threshold_ms": 50}, {"pt-nodb-ig1-mbs8": (True, 1, 3), "pt-nodb-ig2-mbs8": (True, 2, 3)}),
        ({"threshold_ms": 10}, {"pt-nodb-ig1-mbs8": (False, 1, 3), "pt-nodb-ig2-mbs8": (False, 1, 3)}),
        (
            {"percentile": "p50", "threshold_ms": 25},
            {"pt-nodb-ig1-mbs8": (True, 1, 3), "pt-nodb-ig2-mbs8": (True, 2, 3)},
        ),
    ],
)
def test_the_same_windows_decided_under_other_limits(url, limits, expected):
    assert figures(url, **limits) == expected


def test_the_server_figures_follow_the_level_decided_on(url):
    """Under 500 ms ig1 decides on load 2 and ig2 on load 4; under 50 ms on loads 1 and 2: the server figures at
    MaxInvocations are those of the level decided on, re-read from its windows under each limit."""

    def queue(**limits) -> dict[str, float]:
        _, _, results = recommend_from_store(ResultStore.open(url), "levels", **limits)
        return {r.name: r.server_stats["at_max_invocations"]["queue_us"] for r in results}

    assert queue() == {"pt-nodb-ig1-mbs8": 2000.0, "pt-nodb-ig2-mbs8": 3000.0}
    assert queue(threshold_ms=50) == {"pt-nodb-ig1-mbs8": 1000.0, "pt-nodb-ig2-mbs8": 2000.0}


def test_rank_takes_the_limits_on_the_command_line(url, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    invoke = lambda *extra: CliRunner().invoke(build_app(), ["rank", "levels", "--db", url, "--json", *extra])
    default, strict = (
        invoke(),
        invoke("--latency-threshold-ms", "50", "--percentile", "p95", "--max-error-rate", "0.02"),
    )
    assert default.exit_code == 0 and strict.exit_code == 0, default.output + strict.output
    assert json.loads(default.output)["threshold_ms"] == 500
    document = json.loads(strict.output)
    assert (document["threshold_ms"], document["max_error_rate"]) == (50, 0.02)
    assert {r["name"]: round(r["invocations_per_minute"]) for r in document["ranked"]} == {
        "pt-nodb-ig1-mbs8": 601,
        "pt-nodb-ig2-mbs8": 951,
    }  # the load-1 and load-2 levels: mean x 1.00125 wobble
    assert invoke("--percentile", "p42").exit_code != 0


def test_export_takes_the_limits_on_the_command_line(url, tmp_path, monkeypatch):
    """export ranks as rank does: under 500 ms ig2 leads (load 4), under p95 <= 25 ms only ig1's load 1 meets."""
    exported = []

    def write_deliverable(rec, spec, options, results):
        exported.append(rec.ranking.ranked[0].candidate.name)
        raise SystemExit(0)  # the deliverable itself is export's own tests' business

    monkeypatch.setattr("recommender.cli.export.write_deliverable", write_deliverable)
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--latency-threshold-ms", "25"]):
        out = str(tmp_path / f"out{len(exported)}")
        done = CliRunner().invoke(build_app(), ["export", "levels", "--db", url, "--out", out, *extra])
        assert done.exit_code == 0, done.output
    assert exported == ["pt-nodb-ig2-mbs8", "pt-nodb-ig1-mbs8"]
