"""Where a candidate's time went (issue 24 item 3): the job times each stage of a run and stores it; the report sums
them per experiment. The job runs for real against the null endpoint (a child process) behind the remote target."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from recommender.candidates import CandidateResult
from recommender.job.pipeline import Job, JobOptions
from recommender.load.null_endpoint import NullEndpoint
from recommender.metrics.stage_times import STAGES, StageClock, time_spent
from recommender.report.markdown import render_markdown
from recommender.report.rows import build_report
from recommender.review import recommend_from_store
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests.unit.test_pipeline_budget import Recorder


def test_a_stage_run_twice_adds_up_and_an_unknown_one_is_refused() -> None:
    clock = StageClock()
    for _ in range(2):
        with clock.timed("load"):
            time.sleep(0.02)
    clock.stop("teardown")  # never started (a deployment that failed to start): nothing recorded
    assert list(clock.seconds) == ["load"] and clock.seconds["load"] >= 0.04
    with pytest.raises(ValueError, match="unknown stage 'warmup'"):
        clock.start("warmup")


def test_time_spent_sums_stages_in_their_order_and_skips_runs_without_them() -> None:
    runs = [{"load": 10.0, "deploy": 2.0}, None, {"deploy": 3.5, "teardown": 0.25}]
    assert time_spent(runs) == {"deploy": 5.5, "load": 10.0, "teardown": 0.25}
    assert list(time_spent(runs)) == [stage for stage in STAGES if stage in ("deploy", "load", "teardown")]


def one_candidate(tmp_path: Path, name: str, endpoint: NullEndpoint) -> tuple[ResultStore, CandidateResult]:
    """One candidate measured for 1 s against `endpoint` behind the remote target; the store and its result."""
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with endpoint as url:
        spec = ExperimentSpec.model_validate(
            {
                "name": name,
                "correctness": "off",
                "variants": {"dynamic_batching": [False]},
                "target": {"kind": "remote", "endpoint": f"{url}/v2/models/existing"},
                "traffic": {"warmup_seconds": 0, "phases": [{"initial_users": 1, "duration_seconds": 1}]},
            }
        )
        (result,) = Job(spec, store, JobOptions(run_root=tmp_path / "runs"), Recorder()).run()
    return store, result


def test_each_measured_run_stores_its_stages_and_the_report_says_where_the_time_went(tmp_path: Path) -> None:
    store, result = one_candidate(tmp_path, "timed", NullEndpoint(delay_ms=1))
    assert result.status == "ok", result.reason
    stages = result.server.stages
    assert list(stages) == list(STAGES), stages  # every stage, in order (export and deploy are near 0 for remote)
    assert stages["load"] >= 1.0  # the 1 s phase at least
    assert result.duration_s is not None and sum(stages.values()) <= result.duration_s + 0.05
    rec, _, _ = recommend_from_store(store, "timed")
    assert rec.time_spent == stages
    text = render_markdown(build_report(rec))
    assert "## Where the time went" in text and f"| load | {stages['load']:,.1f} |" in text


def test_a_failed_candidate_keeps_the_seconds_it_took(tmp_path: Path) -> None:
    """The endpoint answers every inference with HTTP 500: the probe fails the candidate, and the seconds it spent
    (deploy, the probe, the teardown) are stored with its failed run all the same."""
    _, result = one_candidate(tmp_path, "failing", NullEndpoint(error_share=1.0))
    assert result.status == "failed", (result.status, result.reason)
    assert list(result.server.stages) == ["export", "deploy", "probe", "teardown"], result.server.stages
