"""plan / import / docker preflight, in process (no cloud, no engine)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from recommender.cli import build_app, main
from recommender.decide.budget import RunBudget
from recommender.errors import TargetError
from recommender.spec import ExperimentSpec
from recommender.targets.docker import DockerTarget

DATA = Path(__file__).resolve().parents[1] / "data"
SAGEMAKER = """name: plan-me
variants: {{optimizations: [pt, onnx], dynamic_batching: [false, true]}}
traffic: {{phases: [{{duration_seconds: 300}}]}}
target: {{kind: sagemaker, instance_type: ml.g4dn.xlarge, instance_count: 2,
          role_arn: 'arn:aws:iam::123456789012:role/R', bucket: b,
          image_uri: '123456789012.dkr.ecr.us-east-1.amazonaws.com/recommender-triton:24.10', budget_usd: {budget}}}
"""


@pytest.mark.parametrize("budget", [100, 1])
def test_plan_prints_candidates_duration_and_cost(tmp_path, budget) -> None:
    spec = tmp_path / "plan.yaml"
    spec.write_text(SAGEMAKER.format(budget=budget))
    done = CliRunner().invoke(build_app(), ["plan", str(spec), "--json"])
    # 4 candidates x (5 min + 10 min overhead) x 2 instances = 2 instance-hours at the catalog's g4dn.xlarge price
    estimate = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert estimate["candidates"] == 4 and estimate["instance_hours"] == pytest.approx(2.0)
    assert (
        estimate["estimated_usd"] == pytest.approx(2.0 * estimate["price_per_hour"]) and estimate["price_per_hour"] > 0
    )
    assert estimate["within_budget"] is (budget == 100)
    assert (done.exception is None) is (budget == 100)  # over budget: BudgetExceeded, exit 1 through the CLI


def test_run_budget_refuses_then_stops_by_the_clock() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "x",
            "target": {"kind": "local", "price_per_hour": 36.0, "budget_usd": 1.0},
            "traffic": {"phases": [{"duration_seconds": 30}]},
        }
    )
    now = [0.0]
    budget = RunBudget.for_spec(spec, 1)  # 1 x (0.5 + 0.5 min) at $36/h = $0.60: allowed
    budget.clock = lambda: now[0]
    with pytest.raises(Exception, match=r"spent \$1.00 of the \$1.00 budget"), budget.billed():
        now[0] = 60.0
        budget.check()  # $0.60
        now[0] = 100.0
        budget.check()  # $1.00: stop
    with pytest.raises(Exception, match="above the budget"):
        RunBudget.for_spec(spec, 2)


def test_import_writes_the_experiment_and_prints_notes(tmp_path) -> None:
    out = tmp_path / "imported.yaml"
    done = CliRunner().invoke(
        build_app(), ["import", "sagemaker-job", str(DATA / "sagemaker_job.json"), "--out", str(out)]
    )
    assert done.exit_code == 0, done.output
    assert str(out) in done.output.replace("\n", "") and "note:" in done.output
    notes = yaml.safe_load(out.read_text())["notes"]  # through the YAML emitter, not as comments
    assert notes[0].startswith("Imported from a SageMaker") and len(notes) > 1


def test_docker_preflight_says_when_no_engine_is_reachable(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker CLI at all
    with pytest.raises(TargetError, match="docker command is not installed") as caught:
        DockerTarget().preflight()
    assert "Docker" in caught.value.hint
    fake = tmp_path / "docker"  # a CLI whose engine is down, as `docker version` reports it
    fake.write_text(
        "#!/bin/sh\necho 'Cannot connect to the Docker daemon at unix:///var/run/docker.sock. "
        "Is the docker daemon running?' >&2\nexit 1\n"
    )
    fake.chmod(0o755)
    with pytest.raises(
        TargetError, match="no Docker engine is reachable from this host \\(Cannot connect to the Docker daemon"
    ):
        DockerTarget().preflight()


def test_docker_preflight_on_this_host() -> None:
    """This host as it is, the one outcome it must give: without the CLI, that; with the CLI but no engine configured
    (no DOCKER_HOST, no /var/run/docker.sock), that no engine is reachable; never a crash."""
    if os.environ.get("DOCKER_HOST") or Path("/var/run/docker.sock").exists():
        pytest.skip("a Docker engine is configured on this host: the docker target's own tests cover it")
    expected = "no Docker engine is reachable" if shutil.which("docker") else "the docker command is not installed"
    with pytest.raises(TargetError, match=expected) as raised:
        DockerTarget().preflight()
    assert raised.value.hint


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "cleanup needs --older-than or --run-id: it never deletes every tagged resource at once"),
        (["--dry-run"], "cleanup needs --older-than or --run-id"),
        (["--older-than", "soon"], "--older-than 'soon' is not a duration"),
    ],
)
def test_cleanup_requires_a_scope(capsys, monkeypatch, args, message) -> None:
    """Refused before any AWS call (no credentials or endpoint needed)."""
    monkeypatch.setenv("COLUMNS", "500")
    with pytest.raises(SystemExit) as done:
        main(["cleanup", *args, "--endpoint-url", "http://127.0.0.1:9"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and f"error: {message}" in err and "hint:" in err
