"""`recommender export` produces a model repository that the real tritonserver serves, answering with the right
width."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from recommender.load.payload import inference_bodies
from recommender.spec import PayloadSpec
from recommender.targets.local import LocalTarget
from tests.unit.seeded_study import SPEC, seed_study
from tests.unit.test_report_command import cli_app

pytestmark = pytest.mark.integration

HIDDEN = 32
MICRO = {
    **SPEC,
    "name": "micro",
    "model": {"source": "bert", "architecture": {"layers": 1, "hidden": HIDDEN, "heads": 2, "intermediate": 64}},
    "payload": {"sequence_length": 16},
    "variants": {
        "optimizations": ["pt", "onnx"],
        "dynamic_batching": [False],
        "instance_counts": [1],
        "max_batch_sizes": [4],
    },
}
FIGURES = {
    "pt-nodb-ig1-mbs4": ("ok", None, 900.0, 12.0, 0.0),
    "onnx-nodb-ig1-mbs4": ("ok", None, 1200.0, 9.0, 0.0),  # the winner: more throughput, less latency
}


@pytest.mark.parametrize(("position", "optimization", "artifact"), [(1, "onnx", "model.onnx"), (2, "pt", "model.pt")])
def test_exported_repository_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, position: int, optimization: str, artifact: str
) -> None:
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    seed_study(url, MICRO, FIGURES)
    out = tmp_path / "export"
    result = CliRunner().invoke(
        cli_app(),
        [
            "export",
            "micro",
            "--db",
            url,
            "--rank",
            str(position),
            "--out",
            str(out),
            "--cache-dir",
            str(tmp_path / "cache"),
        ],
    )
    assert result.exit_code == 0, (result.output, result.exception)
    model_dir = out / "model_repository" / "model"
    assert (model_dir / "1" / artifact).is_file() and not (model_dir / "1" / artifact).is_symlink()
    body = inference_bodies(PayloadSpec(sequence_length=16, texts=["exported models answer"]))[0]
    with LocalTarget(ready_timeout=120).deploy(out / "model_repository", "model", tmp_path / "run") as deployment:
        answer = deployment.probe(body)
    (output,) = answer["outputs"]
    assert output["name"] == "embedding" and output["datatype"] == "FP32"
    assert output["shape"] == [1, HIDDEN] and len(output["data"]) == HIDDEN
