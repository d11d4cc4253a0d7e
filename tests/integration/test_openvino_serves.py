"""An `openvino` candidate on the real local tritonserver: the Python-backend runner compiles the ONNX export with the
OpenVINO runtime (CPU) and answers like ONNX Runtime does on the same file (fp32, within 1e-4)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.candidates import Candidate
from recommender.load.payload import inference_bodies
from recommender.modelrepo.export import export_model
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import DynamicBatching, ModelSpec, PayloadSpec
from recommender.targets.local import LocalTarget

pytestmark = pytest.mark.integration
pytest.importorskip("openvino", reason="the openvino optimization needs `python3 -m pip install openvino`")

HIDDEN, SEQUENCE = 32, 16
MODEL = ModelSpec.model_validate(
    {"source": "bert", "architecture": {"layers": 1, "hidden": HIDDEN, "heads": 2, "intermediate": 64}}
)


@pytest.mark.parametrize("batching", [None, DynamicBatching()], ids=["nodb", "db"])
def test_openvino_candidate_serves_on_the_local_triton(tmp_path: Path, batching: DynamicBatching | None) -> None:
    import onnxruntime

    artifact = export_model(MODEL, "openvino", SEQUENCE, "ov-test", tmp_path / "cache")
    assert artifact.format == "openvino" and artifact.path.name == "model.onnx"
    candidate = Candidate("openvino", batching, 1, 4, "local-cpu")
    repository = write_model_repository(candidate, artifact, tmp_path / "repository", threads_per_instance=1)
    assert 'string_value: "openvino"' in (repository / "model" / "config.pbtxt").read_text()
    body = inference_bodies(PayloadSpec(sequence_length=SEQUENCE, texts=["openvino serves here"]))[0]
    with LocalTarget(ready_timeout=120).deploy(repository, "model", tmp_path / "run") as deployment:
        answer = deployment.probe(body)
    (output,) = answer["outputs"]
    assert output["name"] == "embedding" and output["shape"] == [1, HIDDEN]
    feed = {
        tensor["name"]: np.asarray(tensor["data"], dtype=np.int64).reshape(tensor["shape"]) for tensor in body["inputs"]
    }
    reference = onnxruntime.InferenceSession(str(artifact.path)).run(None, feed)[0]
    assert np.allclose(np.asarray(output["data"], dtype=np.float32), reference.ravel(), atol=1e-4)
