"""The Python-backend model (recommender/modelrepo/templates/model.py) binds each input by name, whatever order the
model declares them in (issue 23 item 13). The template runs as Triton would run it: loaded from its file with a fake
`triton_python_backend_utils` (the stub's module), requests in, responses out. ONNX Runtime and OpenVINO are the real
ones, on an ONNX file whose inputs are (attention_mask, input_ids); TensorRT and torch's CUDA calls are fakes at the
native boundary (no GPU here), recording what the runner binds to which tensor name.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType, SimpleNamespace
from typing import Any, ClassVar

import numpy as np
import pytest

from tests.unit.tiny_model import save_onnx

TEMPLATE = Path(__file__).parents[2] / "recommender" / "modelrepo" / "templates" / "model.py"
IDS = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.int64)
MASK = np.array([[1, 1, 0], [1, 0, 0]], dtype=np.int64)
EXPECTED = (IDS * 10 + MASK).sum(axis=1, keepdims=True).astype(np.float32)  # [[62], [152]]; swapped: [[26], [51]]


def fake_pb_utils() -> ModuleType:
    module = ModuleType("triton_python_backend_utils")

    class Tensor:
        def __init__(self, name: str, array: np.ndarray) -> None:
            self.name, self.array = name, array

        def as_numpy(self) -> np.ndarray:
            module.by_dlpack.append(f"as_numpy {self.name}")  # type: ignore[attr-defined]
            return self.array

        def __dlpack__(self, **kwargs: Any) -> Any:
            module.by_dlpack.append(f"__dlpack__ {self.name}")  # type: ignore[attr-defined]
            return self.array.__dlpack__(**kwargs)

        def __dlpack_device__(self) -> Any:
            return self.array.__dlpack_device__()

        @classmethod
        def from_dlpack(cls, name: str, source: Any) -> Tensor:
            module.by_dlpack.append(f"from_dlpack {name}")  # type: ignore[attr-defined]
            return cls(name, np.from_dlpack(source))

    module.Tensor = Tensor  # type: ignore[attr-defined]
    module.by_dlpack = []  # type: ignore[attr-defined]  # how each tensor crossed: as_numpy, __dlpack__, from_dlpack
    module.InferenceResponse = lambda output_tensors, error=None: SimpleNamespace(  # type: ignore[attr-defined]
        outputs={t.name: t.array for t in output_tensors}, error=error
    )
    module.TritonError = lambda message: SimpleNamespace(message=message)  # type: ignore[attr-defined]
    module.get_input_tensor_by_name = lambda request, name: request.get(name)  # type: ignore[attr-defined]
    module.triton_string_to_numpy = lambda name: {"TYPE_FP32": np.float32}[name]  # type: ignore[attr-defined]
    return module


def served(
    monkeypatch: pytest.MonkeyPatch, folder: Path, artifact: str, fmt: str, kind: str = "CPU", ragged: bool = False
) -> Any:
    """The template's TritonPythonModel, initialized as Triton initializes it for `artifact` in `folder`/1 (`ragged`:
    the inputs marked allow_ragged_batch, as a `padding: none` candidate's config marks them)."""
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake_pb_utils())
    spec = importlib.util.spec_from_file_location("served_model", TEMPLATE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    config = {
        # the order recommender writes
        "input": [
            {"name": n} | ({"allow_ragged_batch": True} if ragged else {}) for n in ("input_ids", "attention_mask")
        ],
        "output": [{"name": "embedding", "data_type": "TYPE_FP32"}],
        "parameters": {
            "artifact_file": {"string_value": artifact},
            "artifact_format": {"string_value": fmt},
            "intra_op_threads": {"string_value": "1"},
        },
    }
    model = module.TritonPythonModel()
    model.initialize(
        {
            "model_config": json.dumps(config),
            "model_repository": str(folder),
            "model_version": "1",
            "model_instance_kind": kind,
            "model_instance_device_id": "0",
        }
    )
    return model


def request() -> dict[str, Any]:
    pb = sys.modules["triton_python_backend_utils"]
    return {"input_ids": pb.Tensor("input_ids", IDS), "attention_mask": pb.Tensor("attention_mask", MASK)}


@pytest.fixture(scope="module")
def mask_first_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ONNX model whose inputs are declared (attention_mask, input_ids): sum(input_ids * 10 + attention_mask)."""
    import torch

    class MaskFirst(torch.nn.Module):
        def forward(self, attention_mask: torch.Tensor, input_ids: torch.Tensor) -> torch.Tensor:
            return (input_ids * 10 + attention_mask).to(torch.float32).sum(dim=1, keepdim=True)

    folder = tmp_path_factory.mktemp("repository")
    (folder / "1").mkdir()
    save_onnx(MaskFirst(), folder / "1" / "model.onnx", ["attention_mask", "input_ids"], {0: "batch"})
    return folder


@pytest.mark.parametrize("fmt", ["onnx", "openvino"])
def test_a_model_declaring_attention_mask_first_gets_each_input_by_name(
    monkeypatch: pytest.MonkeyPatch, mask_first_onnx: Path, fmt: str
) -> None:
    if fmt == "openvino":
        pytest.importorskip("openvino")
    model = served(monkeypatch, mask_first_onnx, "model.onnx", fmt)
    (response,) = model.execute([request()])
    assert response.error is None
    np.testing.assert_array_equal(response.outputs["embedding"], EXPECTED)


@pytest.mark.parametrize(
    ("numpy_version", "crossings"),
    [
        ("1.26.4", ["as_numpy input_ids", "as_numpy attention_mask"]),
        ("2.2.6", ["__dlpack__ input_ids", "__dlpack__ attention_mask", "from_dlpack embedding"]),
    ],
)
def test_tensors_cross_to_the_stub_by_dlpack_under_numpy_2_only(
    monkeypatch: pytest.MonkeyPatch, mask_first_onnx: Path, numpy_version: str, crossings: list[str]
) -> None:
    """The stub of nvidia-pytriton 0.7.0 misreads numpy 2 arrays (outputs: every request failed; inputs: wrong values)
    and refuses numpy 1's DLPack capsule: each numpy gets the one path the stub reads (both checked on the real stub,
    docs/gpu.md "One prepared run")."""
    monkeypatch.setattr(np, "__version__", numpy_version)
    model = served(monkeypatch, mask_first_onnx, "model.onnx", "onnx")
    (response,) = model.execute([request()])
    assert response.error is None
    np.testing.assert_array_equal(response.outputs["embedding"], EXPECTED)
    assert sys.modules["triton_python_backend_utils"].by_dlpack == crossings


@pytest.fixture(scope="module")
def dynamic_sequence_onnx(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """sum(input_ids * 10 + attention_mask) per row, batch and sequence dynamic: padding (0, 0) adds nothing."""
    import torch

    class Sum(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return (input_ids * 10 + attention_mask).to(torch.float32).sum(dim=1, keepdim=True)

    folder = tmp_path_factory.mktemp("ragged")
    (folder / "1").mkdir()
    save_onnx(Sum(), folder / "1" / "model.onnx", ["input_ids", "attention_mask"], {0: "batch", 1: "sequence"})
    return folder


@pytest.mark.parametrize(("ragged", "runs"), [(True, 1), (False, 2)])
def test_ragged_requests_are_padded_within_the_batch_and_run_as_one(
    monkeypatch: pytest.MonkeyPatch, dynamic_sequence_onnx: Path, ragged: bool, runs: int
) -> None:
    """padding: none sends each request at its own length; with allow_ragged_batch Triton hands model.py requests of
    different lengths in one execute, and model.py pads them to the longest and runs them as one batch (without it,
    one run per length). Each request's answer is its own rows'."""
    model = served(monkeypatch, dynamic_sequence_onnx, "model.onnx", "onnx", ragged=ragged)
    calls: list[tuple[int, ...]] = []
    runner = model.runner
    model.runner = lambda inputs, names: calls.append(inputs["input_ids"].shape) or runner(inputs, names)
    pb = sys.modules["triton_python_backend_utils"]
    short = np.array([[7, 8]], dtype=np.int64)
    requests = [request(), {"input_ids": pb.Tensor("i", short), "attention_mask": pb.Tensor("m", np.ones_like(short))}]
    first, second = model.execute(requests)
    assert first.error is None and second.error is None and len(calls) == runs
    np.testing.assert_array_equal(first.outputs["embedding"], EXPECTED)
    np.testing.assert_array_equal(second.outputs["embedding"], [[152.0]])
    assert calls[0] == ((3, 3) if ragged else (2, 3))


def test_a_gpu_instance_without_the_cuda_provider_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch, mask_first_onnx: Path
) -> None:
    """This host's onnxruntime is a CPU build: a KIND_GPU instance would serve on CPUExecutionProvider while the run
    is stored as KIND_GPU (issue 23 item 4), so the model refuses to load, saying why and the fix."""
    import onnxruntime

    assert "CUDAExecutionProvider" not in onnxruntime.get_available_providers()
    with pytest.raises(RuntimeError, match="serves this KIND_GPU instance with CPUExecutionProvider, not CUDA") as e:
        served(monkeypatch, mask_first_onnx, "model.onnx", "onnx", kind="GPU")
    assert "pip uninstall onnxruntime, then pip install onnxruntime-gpu" in str(e.value)


class FakeLogger:
    WARNING = 2

    def __init__(self, level: int) -> None:
        self.level = level


class FakeTensorRT(ModuleType):
    """The TensorRT calls of the runner: an engine whose I/O tensors are (attention_mask, input_ids, embedding), an
    execution context that records each input shape and computes the embedding from the tensors bound by name.
    `refused`: the input names whose shape set_input_shape refuses (returns False, as TensorRT does)."""

    def __init__(self, refused: tuple[str, ...] = ()) -> None:
        super().__init__("tensorrt")
        self.__version__ = "10.13.3.9"
        self.Logger = FakeLogger
        self.TensorIOMode = SimpleNamespace(INPUT="INPUT", OUTPUT="OUTPUT")
        self.shapes: dict[str, tuple] = {}
        self.refused = refused
        self.nptype = np.dtype

    def Runtime(self, logger: int) -> Any:
        return SimpleNamespace(deserialize_cuda_engine=lambda data: FakeEngine(self))


class FakeEngine:
    NAMES = ("attention_mask", "input_ids", "embedding")

    def __init__(self, trt: FakeTensorRT) -> None:
        self.trt, self.num_io_tensors = trt, len(self.NAMES)

    def get_tensor_name(self, index: int) -> str:
        return self.NAMES[index]

    def get_tensor_mode(self, name: str) -> str:
        return "OUTPUT" if name == "embedding" else "INPUT"

    def get_tensor_dtype(self, name: str) -> str:
        return "float32" if name == "embedding" else "int64"

    def create_execution_context(self) -> Any:
        return FakeContext(self.trt)


class FakeContext:
    def __init__(self, trt: FakeTensorRT) -> None:
        self.trt, self.bound = trt, {}

    def set_input_shape(self, name: str, shape: tuple) -> bool:
        self.trt.shapes[name] = shape
        return name not in self.trt.refused

    def get_tensor_shape(self, name: str) -> tuple:
        return (self.trt.shapes["input_ids"][0], 1)

    def set_tensor_address(self, name: str, address: int) -> None:
        self.bound[name] = FakeCuda.buffers[address]

    def execute_async_v3(self, stream: int) -> bool:
        ids, mask = self.bound["input_ids"].array, self.bound["attention_mask"].array
        self.bound["embedding"].array[...] = (ids * 10 + mask).sum(axis=1, keepdims=True)
        return True


class FakeCuda:
    """torch's CUDA tensors as host arrays; a tensor's data_ptr() finds it again in `buffers`."""

    buffers: ClassVar[dict[int, Any]] = {}

    def __init__(self, array: np.ndarray) -> None:
        self.array, self.shape, self.dtype = array, array.shape, array.dtype
        FakeCuda.buffers[id(self)] = self

    def to(self, device: Any, non_blocking: bool = False) -> FakeCuda:
        return self

    def data_ptr(self) -> int:
        return id(self)

    def numpy(self) -> np.ndarray:
        return self.array


def fake_torch() -> ModuleType:
    module = ModuleType("torch")
    module.device = str  # type: ignore[attr-defined]
    module.from_numpy = FakeCuda  # type: ignore[attr-defined]
    module.empty = lambda shape, dtype, device: FakeCuda(np.zeros(shape, dtype))  # type: ignore[attr-defined]
    module.cuda = SimpleNamespace(  # type: ignore[attr-defined]
        set_device=lambda device: None,
        Stream=lambda device: SimpleNamespace(cuda_stream=0, synchronize=lambda: None),
        stream=lambda stream: contextlib.nullcontext(),
    )
    return module


def served_engine(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, trt: FakeTensorRT) -> Any:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.plan").write_bytes(b"engine")
    monkeypatch.setitem(sys.modules, "tensorrt", trt)
    monkeypatch.setitem(sys.modules, "torch", fake_torch())
    return served(monkeypatch, tmp_path, "model.plan", "tensorrt", kind="GPU")


def test_tensorrt_binds_each_input_tensor_by_name(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    trt = FakeTensorRT()
    (response,) = served_engine(monkeypatch, tmp_path, trt).execute([request()])
    assert response.error is None
    np.testing.assert_array_equal(response.outputs["embedding"], EXPECTED)
    assert trt.shapes == {"attention_mask": (2, 3), "input_ids": (2, 3)}


def test_a_shape_tensorrt_refuses_is_an_error_naming_the_input_and_shape(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    (response,) = served_engine(monkeypatch, tmp_path, FakeTensorRT(refused=("input_ids",))).execute([request()])
    assert "ValueError: TensorRT refused input 'input_ids' of shape (2, 3)" in response.error.message
    assert response.outputs == {}


def test_a_torchscript_traced_on_the_cpu_is_pointed_at_the_gpu_it_serves_on(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """On an H200 every request to a KIND_GPU `pt` instance failed (docs/gpu.md): the trace of transformers' BERT
    holds `device=cpu` constants that map_location does not move. The runner rewrites them for its device; here the
    rewrite is checked on the graph (no GPU to run it on), and the CPU path is left as it was."""
    torch = pytest.importorskip("torch")
    from recommender.modelrepo.export import export_model
    from recommender.spec.model import BertArchitecture, ModelSpec

    spec = ModelSpec(source="bert", architecture=BertArchitecture(layers=1, hidden=32, heads=2, intermediate=64))
    artifact = export_model(spec, "pt", 16, "tiny", tmp_path)
    module = torch.jit.load(str(artifact.path))

    def devices(loaded: Any) -> list[str]:
        found = []
        for sub in loaded.modules():
            with contextlib.suppress(RuntimeError):  # a container without forward
                found += [
                    n.s("value")
                    for n in sub.graph.findAllNodes("prim::Constant")
                    if n.output().type().kind() == "DeviceObjType"
                ]
        return found

    assert "cpu" in devices(module)  # the defect's cause: the trace recorded the CPU
    monkeypatch.setitem(sys.modules, "triton_python_backend_utils", fake_pb_utils())
    loader = importlib.util.spec_from_file_location("served_model", TEMPLATE)
    assert loader is not None and loader.loader is not None
    template = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(template)
    ids = torch.randint(1000, 2000, (1, 16))
    before = module(ids, torch.ones_like(ids))
    assert template.retarget_device_constants(module, "cpu") == 0
    assert torch.equal(module(ids, torch.ones_like(ids)), before)
    assert template.retarget_device_constants(module, "cuda:0") >= 1
    assert "cpu" not in devices(module) and "cuda:0" in devices(module)
    assert template.retarget_device_constants(module, "cuda:0") == 0
