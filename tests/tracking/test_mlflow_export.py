"""`recommender export EXP --mlflow URI` against a real MLflow tracking server (tests/tracking/conftest.py), read
back with MLflow's own Python client from the server's virtualenv, so that what is checked is what MLflow stored."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from recommender.job.pipeline import Job, JobOptions
from recommender.load.null_endpoint import NullEndpoint
from recommender.metrics.payload_lengths import PayloadLengths
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests.tracking.conftest import MLFLOW
from tests.unit.test_pipeline_budget import Recorder

pytestmark = [pytest.mark.integration, pytest.mark.tracking]

READ_BACK = """
import json, sys
import mlflow
from mlflow import MlflowClient
client = MlflowClient(sys.argv[1])
experiment = client.get_experiment_by_name(sys.argv[2])
runs = client.search_runs([experiment.experiment_id])
print(json.dumps([{
    "name": r.info.run_name, "status": r.info.status, "tags": r.data.tags, "params": r.data.params,
    "metrics": r.data.metrics,
    "history": {k: len(client.get_metric_history(r.info.run_id, k)) for k in r.data.metrics},
    "windows": [m.value for m in sorted(client.get_metric_history(r.info.run_id, "window_invocations_per_minute"),
                                        key=lambda m: m.step)],
    "artifacts": sorted(a.path for a in client.list_artifacts(r.info.run_id)),
} for r in runs]))
"""


def read_back(uri: str, experiment: str) -> dict[str, dict]:
    python = MLFLOW.parent / "python"
    done = subprocess.run([str(python), "-c", READ_BACK, uri, experiment], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return {run["name"]: run for run in json.loads(done.stdout)}


def export(db: str, *args: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "recommender", "export", "tracked", "--db", db, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, ResultStore]:
    """Two candidates measured for real against the null endpoint behind the remote target (1 s of load each)."""
    folder = tmp_path_factory.mktemp("tracked")
    db = f"sqlite:///{folder / 'results.db'}"
    store = ResultStore.open(db)
    with NullEndpoint(delay_ms=1) as url:
        spec = ExperimentSpec.model_validate(
            {
                "name": "tracked",
                "correctness": "off",
                "variants": {"dynamic_batching": [False, True]},
                "target": {"kind": "remote", "endpoint": f"{url}/v2/models/existing", "price_per_hour": 1.5},
                "traffic": {
                    "warmup_seconds": 0,
                    "window_seconds": 0.5,
                    "phases": [{"initial_users": 1, "duration_seconds": 2}],
                },
            }
        )
        results = Job(spec, store, JobOptions(run_root=folder / "runs"), Recorder()).run()
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    return db, store


def test_every_candidate_becomes_one_mlflow_run_and_a_second_export_updates_it(mlflow_server, stored) -> None:
    db, store = stored
    first = export(db, "--mlflow", mlflow_server)
    assert first.returncode == 0, first.stdout + first.stderr
    assert first.stdout.count("mlflow created") == 2 and "2 candidates exported to MLflow" in first.stdout
    runs = read_back(mlflow_server, "tracked")
    results = {r.name: r for r in store.results("tracked")}
    assert set(runs) == set(results)
    for name, run in runs.items():
        result = results[name]
        assert run["status"] == "FINISHED" and run["tags"]["recommender.key"] == result.key
        assert run["params"]["dynamic_batching"] == str(result.config["dynamic_batching"])
        assert run["metrics"]["max_invocations"] == pytest.approx(result.headline.max_invocations)
        assert run["metrics"]["latency_p95_ms"] == pytest.approx(result.headline.latency("p95"))
        assert run["metrics"]["cost_per_hour"] > 0 and run["metrics"]["within_limits"] == 1.0
        mean_tokens = PayloadLengths.from_dict(result.payload).mean_tokens  # the packaged texts' own tokens
        tokens_per_second = result.headline.max_invocations / 60 * mean_tokens
        assert run["metrics"]["input_tokens_per_second"] == pytest.approx(tokens_per_second)
        per_million_tokens = run["metrics"]["cost_per_million"] / mean_tokens
        assert run["metrics"]["cost_per_million_tokens"] == pytest.approx(per_million_tokens)
        windows = [w.ipm for w in store.window_records(result.run_id)]
        assert run["windows"] == pytest.approx(windows) and len(windows) >= 3  # the per-window series, in order
        assert {"report.md", "report.html"} <= set(run["artifacts"])
        assert {f"stage_{stage}_s" for stage in ("probe", "load", "teardown")} <= set(run["metrics"])
    verdicts = sorted(run["tags"]["recommender.verdict"] for run in runs.values())
    assert verdicts[-1] == "recommended" and verdicts[0].startswith("ranked 2")

    again = export(db, "--mlflow", mlflow_server)
    assert again.returncode == 0 and again.stdout.count("mlflow updated") == 2, again.stdout + again.stderr
    rerun = read_back(mlflow_server, "tracked")
    assert set(rerun) == set(runs)  # the same two runs, updated
    for name, run in rerun.items():  # every value logged again, kept once: the same history as after the first
        assert run["history"] == runs[name]["history"] and run["history"]["max_invocations"] == 1, run["history"]


def test_an_unreachable_server_is_one_line_and_exit_2(stored) -> None:
    db, _ = stored
    done = export(db, "--mlflow", "http://127.0.0.1:9")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "MLflow at http://127.0.0.1:9 cannot be reached" in done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_nothing_to_export_to_is_a_usage_error(stored) -> None:
    db, _ = stored
    done = export(db)
    assert done.returncode == 2 and "nothing to export to" in done.stdout + done.stderr


def test_the_deliverable_goes_to_the_exported_candidates_run(mlflow_server, stored, tmp_path) -> None:
    db, _ = stored
    done = export(db, "--mlflow", mlflow_server, "--out", str(tmp_path / "deploy"))
    assert done.returncode == 0, done.stdout + done.stderr
    runs = read_back(mlflow_server, "tracked")
    winner = next(run for run in runs.values() if run["tags"]["recommender.verdict"] == "recommended")
    other = next(run for run in runs.values() if run is not winner)
    assert "deliverable" in winner["artifacts"] and "deliverable" not in other["artifacts"]


class Notes(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.notes: list[str] = []

    def stage(self, candidate, text) -> None:
        self.notes.append(text)


def tracked_spec(url: str, mlflow: str, name: str) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": name,
            "correctness": "off",
            "tracking": {"mlflow": mlflow},
            "variants": {"dynamic_batching": [False, True]},
            "target": {"kind": "remote", "endpoint": f"{url}/v2/models/existing"},
            "traffic": {
                "warmup_seconds": 0,
                "window_seconds": 0.5,
                "phases": [{"initial_users": 1, "duration_seconds": 1}],
            },
        }
    )


def test_tracking_in_the_file_logs_each_candidate_while_the_job_runs(mlflow_server, tmp_path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with NullEndpoint(delay_ms=1) as url:
        results = Job(tracked_spec(url, mlflow_server, "logged"), store, JobOptions(run_root=tmp_path), Notes()).run()
    runs = read_back(mlflow_server, "logged")
    assert set(runs) == {r.name for r in results} and len(runs) == 2
    assert all(run["status"] == "FINISHED" and "max_invocations" in run["metrics"] for run in runs.values())


def test_a_tracking_server_that_cannot_be_reached_is_said_once_and_the_job_goes_on(tmp_path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    reporter = Notes()
    with NullEndpoint(delay_ms=1) as url:
        results = Job(
            tracked_spec(url, "http://127.0.0.1:9", "unlogged"), store, JobOptions(run_root=tmp_path), reporter
        ).run()
    assert [r.status for r in results] == ["ok", "ok"]
    said = [note for note in reporter.notes if "MLflow" in note]
    assert len(said) == 1, said  # said once: the second candidate does not try again
    assert said[0].startswith("MLflow tracking stopped for this run: MLflow at http://127.0.0.1:9 cannot be reached")
