"""The Python-backend runner's ONNX Runtime session (recommender/modelrepo/templates/model.py) with this host's real
onnxruntime (a CPU build: CPUExecutionProvider only) on a one-node ONNX model; Triton's Python-backend utilities,
which exist only inside the stub, are a stand-in module. A KIND_GPU instance whose session would run on the CPU
refuses to start (issue 23 item 4): the run is stored as KIND_GPU, so a silent CPU fallback would be a wrong figure."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

TEMPLATE = Path(__file__).resolve().parents[2] / "recommender" / "modelrepo" / "templates" / "model.py"


@pytest.fixture
def template(monkeypatch) -> ModuleType:
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location("triton_model_template", TEMPLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def identity(tmp_path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "identity",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
    )
    path = tmp_path / "model.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return path


def test_a_gpu_instance_without_the_cuda_provider_refuses_to_start(template, identity) -> None:
    import onnxruntime

    assert "CUDAExecutionProvider" not in onnxruntime.get_available_providers()  # this host's CPU build
    with pytest.raises(RuntimeError, match="serves this KIND_GPU instance with CPUExecutionProvider, not CUDA") as e:
        template.OnnxRunner(str(identity), 1, "cuda:0")
    assert "pip uninstall onnxruntime, then pip install onnxruntime-gpu" in str(e.value)


def test_a_cpu_instance_serves_on_the_cpu_provider(template, identity) -> None:
    runner = template.OnnxRunner(str(identity), 1, "cpu")
    (out,) = runner([np.ones((2, 4), dtype=np.float32)], ["y"])
    assert out.shape == (2, 4) and float(out.sum()) == 8.0
