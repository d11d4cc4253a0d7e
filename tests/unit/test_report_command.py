"""`recommender rank`, `report` and `export` through Typer's CliRunner on the real app and a seeded store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.errors import ExportError, InputError, StoreError, UsageError
from tests.unit.seeded_study import SPEC, seed_study
from tests.unit.tiny_model import save_pooling_model


def cli_app() -> typer.Typer:
    return build_app()


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)  # the packaged price catalog (ml.g4dn.xlarge at 0.7364), no refreshed copy
    monkeypatch.setenv("COLUMNS", "200")
    return CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    seed_study(url)
    return url


@pytest.fixture(scope="session")
def torchscript_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny TorchScript embedding model (input_ids, attention_mask -> FP32 [batch, 8]) as a user model file."""
    return save_pooling_model(tmp_path_factory.mktemp("model") / "model.pt")


@pytest.fixture
def export_db(tmp_path: Path, torchscript_model: Path) -> str:
    url = f"sqlite:///{tmp_path / 'export.db'}"
    seed_study(url, {**SPEC, "model": {"source": "torchscript", "path": str(torchscript_model)}})
    return url


def invoke(runner: CliRunner, *args: str):
    return runner.invoke(cli_app(), list(args))


def test_rank_prints_the_ranking_with_reasons(runner: CliRunner, db: str) -> None:
    result = invoke(runner, "rank", "seed-study", "--db", db)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    card = "\n".join(lines[lines.index("#1 pt-db-ig2-mbs8: recommended") :][:4])  # not a terminal: one card each
    assert "score 1.000" in card and "MaxInvocations/min 540" in card and "p95 ms 38.0" in card
    assert "cost per million 22.7284 USD" in card and "pareto yes" in card
    assert 'failed: tritonserver exited: <script>alert("x")</script> & load failed' in result.output
    assert "p95 latency 520 ms is above the 500 ms threshold" in result.output
    assert "56 instances of ml.g4dn.xlarge serve 30,000 per minute at 41.24 USD/hour" in result.output


def test_rank_json(runner: CliRunner, db: str) -> None:
    result = invoke(runner, "rank", "seed-study", "--db", db, "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["recommended"] == "pt-db-ig2-mbs8" and document["instance_count"] == 56
    assert [r["name"] for r in document["ranked"]] == [
        "pt-db-ig2-mbs8",
        "pt-db-ig1-mbs8",
        "pt-nodb-ig2-mbs8",
        "pt-nodb-ig1-mbs8",
    ]
    assert document["capacity"]["cost_per_hour"] == pytest.approx(41.2384)
    assert document["autoscaling"]["max_capacity"] == 112
    assert {e["name"] for e in document["excluded"]} == {
        "onnx-db-ig1-mbs8",
        "onnx-db-ig2-mbs8",
        "onnx-nodb-ig1-mbs8",
        "onnx-nodb-ig2-mbs8",
    }


@pytest.mark.parametrize(
    ("fmt", "marker"),
    [
        ("md", "# seed-study: serving recommendation"),
        ("csv", "rank,configuration,status,"),
        ("html", "<!DOCTYPE html>"),
    ],
)
def test_report_to_stdout_and_to_a_file(runner: CliRunner, db: str, tmp_path: Path, fmt: str, marker: str) -> None:
    shown = invoke(runner, "report", "seed-study", "--format", fmt, "--db", db)
    assert shown.exit_code == 0, shown.output
    assert shown.output.startswith(marker)
    out = tmp_path / "reports" / f"report.{fmt}"
    written = invoke(runner, "report", "seed-study", "--format", fmt, "--db", db, "--out", str(out))
    assert written.exit_code == 0, written.output
    assert out.read_text() == shown.output


@pytest.mark.parametrize("command", [["rank", "nope"], ["report", "nope"], ["export", "nope", "--out", "x"]])
def test_unknown_experiment_is_a_store_error_with_a_hint(runner: CliRunner, db: str, command: list[str]) -> None:
    result = invoke(runner, *command, "--db", db)
    assert isinstance(result.exception, StoreError)
    assert "no experiment named 'nope'" in result.exception.message and "seed-study" in result.exception.hint


@pytest.mark.parametrize("command", [["rank", "x"], ["report", "x"], ["export", "x", "--out", "x"]])
def test_a_database_that_is_not_there_is_said_so_and_not_made(
    runner: CliRunner, tmp_path: Path, command: list[str]
) -> None:
    """A mistyped --db, or a folder where nothing ran: exit 2 naming the file, nothing left behind."""
    missing = tmp_path / "typo.db"
    result = invoke(runner, *command, "--db", f"sqlite:///{missing}")
    assert isinstance(result.exception, InputError) and result.exception.exit_code == 2
    assert result.exception.message == f"no results database at {missing}"
    assert "recommender run FILE" in result.exception.hint
    assert not list(tmp_path.glob("typo.db*"))


def test_export_with_nothing_eligible_is_an_export_error(runner: CliRunner, tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'bad.db'}"
    seed_study(url, figures={"pt-db-ig2-mbs8": ("ok", None, 540.0, 900.0, 0.0)})
    result = invoke(runner, "export", "seed-study", "--db", url, "--out", str(tmp_path / "out"))
    assert isinstance(result.exception, ExportError)
    assert "has no candidate to export" in result.exception.message and "recommender rank" in result.exception.hint


def test_export_rank_out_of_range(runner: CliRunner, db: str, tmp_path: Path) -> None:
    result = invoke(runner, "export", "seed-study", "--db", db, "--rank", "5", "--out", str(tmp_path / "out"))
    assert isinstance(result.exception, ExportError)
    assert result.exception.message == "rank 5 is out of range: 4 candidates of 'seed-study' are ranked"
    assert "between 1 and 4" in result.exception.hint


def read_json(path: Path) -> dict:
    return json.loads(path.read_text())


def export(runner: CliRunner, db: str, out: Path, *extra: str):
    """`recommender export seed-study` into `out` with a cache beside it."""
    cache = str(out.parent / "cache")
    return invoke(runner, "export", "seed-study", "--db", db, "--out", str(out), "--cache-dir", cache, *extra)


def test_export_writes_repository_requests_and_readme(runner: CliRunner, export_db: str, tmp_path: Path) -> None:
    out = tmp_path / "deliverable"
    image = "123.dkr.ecr.us-east-1.amazonaws.com/triton:1"
    result = export(runner, export_db, out, "--image", image, "--endpoint-name", "bert-prod")
    assert result.exit_code == 0, result.output
    config = (out / "model_repository" / "model" / "config.pbtxt").read_text()
    assert "max_batch_size: 8" in config and "count: 2" in config and "max_queue_delay_microseconds: 2000" in config
    assert (
        "preferred_batch_size: [ 4, 8 ]" in config and "intra_op_threads" in config and '"2"' in config
    )  # 4 vCPUs / 2
    artifact = out / "model_repository" / "model" / "1" / "model.pt"
    assert artifact.is_file() and not artifact.is_symlink()
    assert (out / "model_repository" / "model" / "1" / "model.py").is_file()
    model = read_json(out / "sagemaker" / "create_model.json")
    assert model["PrimaryContainer"]["Image"] == "123.dkr.ecr.us-east-1.amazonaws.com/triton:1"
    assert model["PrimaryContainer"]["Environment"] == {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "model"}
    (variant,) = read_json(out / "sagemaker" / "create_endpoint_config.json")["ProductionVariants"]
    assert variant == {
        "VariantName": "AllTraffic",
        "ModelName": "bert-prod",
        "InstanceType": "ml.g4dn.xlarge",
        "InitialInstanceCount": 56,
    }
    target = read_json(out / "autoscaling" / "register_scalable_target.json")
    assert (target["ResourceId"], target["MinCapacity"], target["MaxCapacity"]) == (
        "endpoint/bert-prod/variant/AllTraffic",
        1,
        112,
    )
    policy = read_json(out / "autoscaling" / "put_scaling_policy.json")
    assert policy["TargetTrackingScalingPolicyConfiguration"]["TargetValue"] == 270.0
    readme = (out / "README.md").read_text()
    assert "pt-db-ig2-mbs8" in readme and "<SAGEMAKER_EXECUTION_ROLE_ARN>" in readme
    assert "<TRITON_SERVING_IMAGE_URI>" not in readme  # --image was given
    again = export(runner, export_db, out)
    assert isinstance(again.exception, UsageError)
    assert again.exception.message == f"{out} is not empty; not writing into it without --force"
    forced = export(runner, export_db, out, "--force")
    assert forced.exit_code == 0, forced.output
    assert "<TRITON_SERVING_IMAGE_URI>" in (out / "README.md").read_text()  # replaced by the second export


def test_export_of_a_lower_rank_uses_its_own_sizing(runner: CliRunner, export_db: str, tmp_path: Path) -> None:
    out = tmp_path / "second"
    result = export(runner, export_db, out, "--rank", "2")
    assert result.exit_code == 0, result.output
    (variant,) = read_json(out / "sagemaker" / "create_endpoint_config.json")["ProductionVariants"]
    assert variant["InitialInstanceCount"] == 63  # ceil(30000 / 480)
    assert variant["ModelName"] == "seed-study-pt-db-ig1-mbs8"
    assert (
        read_json(out / "sagemaker" / "create_model.json")["PrimaryContainer"]["Image"] == "<TRITON_SERVING_IMAGE_URI>"
    )
    assert "the recommendation is pt-db-ig2-mbs8" in (out / "README.md").read_text()
