"""TensorRT engine-build parameters behind their seam (profile shapes, precision and network flags, the cache key), the
true skip reasons of `trt` candidates, and, where the `tensorrt` wheel imports, the same parameters against the real
TensorRT enums. Building an engine needs a GPU: no test here builds one (docs/gpu.md).

`RecordingTensorRT` stands in for the native TensorRT library (libnvinfer cannot load on a host without the NVIDIA
libraries): it records what configure_builder asks of a builder config, with TensorRT's own method names.
"""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from recommender.errors import BuildError, CandidateSkipped
from recommender.hardware import Gpu, Hardware, ServingHardware, detect_hardware
from recommender.install import pip_install, requirement
from recommender.load.payload import length_profile, padded_lengths, request_token_ids
from recommender.modelrepo.export import export_model
from recommender.modelrepo.tensorrt_engine import (
    EngineParameters,
    build_engine,
    configure_builder,
    engine_key,
    network_flags,
    trt_skip_reason,
)
from recommender.spec import ModelSpec, PayloadSpec

NAMES = ("input_ids", "attention_mask")
HAS_TENSORRT = importlib.util.find_spec("tensorrt") is not None
needs_tensorrt = pytest.mark.skipif(
    not HAS_TENSORRT,
    reason="the tensorrt wheel is not installed here: its libraries "
    "(tensorrt-cu12-libs) come from pypi.nvidia.com only; pip install 'tensorrt>=10,<11'",
)


class RecordingTensorRT:
    """The parts of the tensorrt module configure_builder and network_flags touch, recording the calls."""

    def __init__(self, version: str) -> None:
        self.__version__ = version
        self.BuilderFlag = SimpleNamespace(FP16="BuilderFlag.FP16")
        self.MemoryPoolType = SimpleNamespace(WORKSPACE="MemoryPoolType.WORKSPACE")
        self.NetworkDefinitionCreationFlag = SimpleNamespace(EXPLICIT_BATCH=0)
        self.calls: list[tuple] = []

    def create_optimization_profile(self):
        return SimpleNamespace(set_shape=lambda *args: self.calls.append(("set_shape", *args)))

    def add_optimization_profile(self, profile) -> None:
        self.calls.append(("add_optimization_profile",))

    def set_flag(self, flag) -> None:
        self.calls.append(("set_flag", flag))

    def set_memory_pool_limit(self, pool, size) -> None:
        self.calls.append(("set_memory_pool_limit", pool, size))


def test_one_profile_from_batch_one_to_max_batch_at_the_sequence_length() -> None:
    shapes = EngineParameters(NAMES, (128, 128, 128), 16).profile_shapes()
    assert shapes == {name: ((1, 128), (16, 128), (16, 128)) for name in NAMES}


def test_the_profile_spans_the_payloads_lengths_optimised_for_the_median() -> None:
    """A payload of requests from 9 to 61 tokens (median 14) under padding none: the engine takes every length it
    is sent, tuned at the median (it was built for one length and refused every other)."""
    lengths = length_profile([14, 9, 61, 14, 20, 11, 13])
    shapes = EngineParameters(NAMES, lengths, 8).profile_shapes()
    assert shapes == {name: ((1, 9), (8, 14), (8, 61)) for name in NAMES}


def test_the_profile_of_each_padding_comes_from_the_padded_lengths() -> None:
    """max: one length (min = opt = max); buckets: powers of two; none: the requests' own lengths."""
    payload = PayloadSpec(texts=["a", "a b c d e f g h i j", "a b c"])  # 3, 12 and 5 tokens
    lengths = sorted(len(ids) for ids in request_token_ids(payload))
    profiles = {p: length_profile(padded_lengths(payload, p)) for p in ("max", "buckets", "none")}
    assert profiles["max"] == (lengths[-1],) * 3
    assert profiles["none"] == tuple(lengths)
    assert profiles["buckets"] == (4, 8, lengths[-1]) and lengths == [3, 5, 12]


@pytest.mark.parametrize(
    ("precision", "major", "flags"),
    [("fp32", 10, ()), ("fp16", 10, ("FP16",)), ("fp16", 8, ("FP16",)), ("fp32", 11, ())],
)
def test_precision_flags(precision: str, major: int, flags: tuple) -> None:
    assert EngineParameters(NAMES, (128, 128, 128), 8, precision).builder_flag_names(major) == flags


@pytest.mark.parametrize(("major", "names"), [(8, ("EXPLICIT_BATCH",)), (10, ()), (11, ())])
def test_explicit_batch_only_where_the_version_needs_it(major: int, names: tuple) -> None:
    assert EngineParameters(NAMES, (128, 128, 128), 8).network_flag_names(major) == names


@pytest.mark.parametrize(
    "bad",
    [
        {"precision": "int8"},
        {"max_batch_size": 0},
        {"sequence_lengths": (0, 8, 16)},
        {"sequence_lengths": (16, 8, 32)},
        {"sequence_lengths": (8, 32, 16)},
    ],
)
def test_bad_parameters_are_build_errors(bad: dict) -> None:
    with pytest.raises(BuildError):
        EngineParameters(**{"input_names": NAMES, "sequence_lengths": (8, 16, 128), "max_batch_size": 8} | bad)


def test_configure_builder_applies_profile_flags_and_workspace() -> None:
    trt = RecordingTensorRT("10.5.0.18")
    configure_builder(trt, trt, trt, EngineParameters(NAMES, (12, 20, 64), 4, "fp16", workspace_bytes=2**28))
    assert trt.calls == [
        ("set_shape", "input_ids", (1, 12), (4, 20), (4, 64)),
        ("set_shape", "attention_mask", (1, 12), (4, 20), (4, 64)),
        ("add_optimization_profile",),
        ("set_flag", "BuilderFlag.FP16"),
        ("set_memory_pool_limit", "MemoryPoolType.WORKSPACE", 2**28),
    ]


@pytest.mark.parametrize(("version", "bits"), [("8.6.1", 1), ("10.5.0.18", 0)])
def test_network_flags_bitmask(version: str, bits: int) -> None:
    assert network_flags(RecordingTensorRT(version), EngineParameters(NAMES, (64, 64, 64), 4)) == bits


def test_engine_key_changes_with_each_thing_an_engine_depends_on() -> None:
    base = EngineParameters(NAMES, (128, 128, 128), 8)
    keys = {
        engine_key("sha-a", "NVIDIA A10G", "10.5.0", base),
        engine_key("sha-b", "NVIDIA A10G", "10.5.0", base),
        engine_key("sha-a", "Tesla T4", "10.5.0", base),
        engine_key("sha-a", "NVIDIA A10G", "10.6.0", base),
        engine_key("sha-a", "NVIDIA A10G", "10.5.0", EngineParameters(NAMES, (128, 128, 128), 8, "fp16")),
        engine_key("sha-a", "NVIDIA A10G", "10.5.0", EngineParameters(NAMES, (128, 128, 128), 16)),
        engine_key("sha-a", "NVIDIA A10G", "10.5.0", EngineParameters(NAMES, (64, 64, 64), 8)),
        engine_key("sha-a", "NVIDIA A10G", "10.5.0", EngineParameters(NAMES, (8, 64, 128), 8)),
    }
    assert len(keys) == 8
    assert engine_key("sha-a", "NVIDIA A10G", "10.5.0", base) == engine_key("sha-a", "NVIDIA A10G", "10.5.0", base)


CPU_HOST = Hardware("Intel Xeon", 2, gpu_status="no GPU (NVML: Driver Not Loaded)")
GPU_HOST = Hardware("Intel Xeon", 8, (Gpu(0, "NVIDIA A10G", 23028.0),), "550.1", "12.4", "1 GPU(s)")


def test_skip_reason_on_a_cpu_run_names_the_hardware_and_the_install() -> None:
    reason = trt_skip_reason(ServingHardware("cpu", CPU_HOST))
    assert (
        "needs an NVIDIA GPU" in reason
        and "Driver Not Loaded" in reason
        and pip_install(requirement("nvidia-ml-py")) in reason
    )


def test_skip_reason_for_a_remote_gpu_instance() -> None:
    reason = trt_skip_reason(ServingHardware("gpu", None, declared="ml.g5.xlarge"))
    assert "ml.g5.xlarge is a remote instance" in reason


@pytest.mark.skipif(HAS_TENSORRT, reason="tensorrt is installed here: the missing-package reason cannot arise")
def test_skip_reason_on_a_gpu_host_without_tensorrt_gives_the_install_command() -> None:
    assert trt_skip_reason(ServingHardware("gpu", GPU_HOST)) == (
        f"TensorRT is not installed on this GPU host: {shlex.quote(sys.executable)} -m "
        "pip install 'tensorrt>=10,<11' (the [tensorrt] extra; "
        "it needs the NVIDIA driver)"  # for the interpreter running recommender, its virtualenv on PATH or not
    )


@needs_tensorrt
def test_flag_names_resolve_to_the_real_tensorrt_enums() -> None:
    import tensorrt as trt

    from recommender.modelrepo.tensorrt_engine import trt_major

    params = EngineParameters(NAMES, (16, 64, 128), 8, "fp16" if trt_major(trt.__version__) < 11 else "fp32")
    for name in params.builder_flag_names(trt_major(trt.__version__)):
        assert isinstance(getattr(trt.BuilderFlag, name), trt.BuilderFlag)
    assert isinstance(network_flags(trt, params), int)
    assert trt.MemoryPoolType.WORKSPACE is not None


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_tensorrt_11_is_refused_with_the_reason_before_anything_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, precision: str
) -> None:
    """TensorRT 11 builds strongly typed networks only (issue 23 item 17): every trt candidate is skipped with one line
    saying why, before the ONNX export."""
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="11.0.0.7"))
    reason = trt_skip_reason(ServingHardware("gpu", GPU_HOST))
    assert reason is not None and "\n" not in reason
    assert reason.startswith("TensorRT 11.0.0.7 is not supported: TensorRT 11 removed the builder's fp16/int8 flags")
    assert "ModelOpt AutoCast" in reason and "engine key" in reason and "'tensorrt>=10,<11'" in reason
    with pytest.raises(CandidateSkipped, match=r"^TensorRT 11\.0\.0\.7 is not supported"):
        export_model(
            ModelSpec(source="onnx", path=tmp_path / "model.onnx"),
            "trt",
            16,
            "fp",
            tmp_path / "cache",
            precision,
            4,
            serving=ServingHardware("gpu", GPU_HOST),
        )
    assert not (tmp_path / "cache").exists()


def test_tensorrt_10_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.13.3.9"))
    assert trt_skip_reason(ServingHardware("gpu", GPU_HOST)) is None


def test_a_trt_candidate_on_this_host_is_skipped_before_anything_is_exported(tmp_path) -> None:
    """The real detection (NVML through nvidia-ml-py) on whatever host runs the tests."""
    host = detect_hardware()
    if host.gpus and HAS_TENSORRT:
        pytest.skip("this host has a GPU and TensorRT: test_engine_builds_on_this_gpu covers it")
    with pytest.raises(CandidateSkipped, match=r"TensorRT needs an NVIDIA GPU|TensorRT is not installed"):
        export_model(
            ModelSpec(source="onnx", path=tmp_path / "model.onnx"), "trt", 16, "fp", tmp_path / "cache", "fp16", 4
        )
    assert not (tmp_path / "cache").exists()


@needs_tensorrt
@pytest.mark.skipif(not detect_hardware().gpus, reason="building a TensorRT engine needs an NVIDIA GPU (none detected)")
def test_engine_builds_on_this_gpu(tmp_path) -> None:
    import tensorrt as trt
    import torch

    class Pooling(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return (input_ids * attention_mask).to(torch.float32).sum(dim=1, keepdim=True)

    ids = torch.ones(2, 16, dtype=torch.int64)
    torch.onnx.export(
        Pooling(),
        (ids, ids),
        str(tmp_path / "m.onnx"),
        input_names=list(NAMES),
        output_names=["embedding"],
        dynamic_axes={n: {0: "batch"} for n in (*NAMES, "embedding")},
        opset_version=17,
        dynamo=False,
    )
    build_engine(tmp_path / "m.onnx", EngineParameters(NAMES, (4, 8, 16), 4), tmp_path / "model.plan")
    engine = trt.Runtime(trt.Logger(trt.Logger.WARNING)).deserialize_cuda_engine((tmp_path / "model.plan").read_bytes())
    assert engine.num_io_tensors == 3 and tuple(engine.get_tensor_profile_shape("input_ids", 0)[2]) == (4, 16)


@pytest.mark.parametrize("padding", ["max", "buckets", "none"])
def test_a_candidates_engine_is_built_for_its_paddings_lengths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, padding: str
) -> None:
    """The builder call as far as it goes without TensorRT (issue 36): a trt candidate's repository asks for an engine
    whose profile is (shortest, median, longest) of the payload's requests under the candidate's padding, from the
    real ONNX export (dynamic sequence), and its native config declares the sequence -1. The child process that
    would run TensorRT (build_on) is the fake boundary, recording what it is asked to build."""
    from recommender.candidates import Candidate
    from recommender.modelrepo import tensorrt_engine
    from recommender.modelrepo.repository import candidate_repository
    from recommender.spec import ExperimentSpec

    built: list[EngineParameters] = []

    def build_on(gpu, onnx_path, params, target) -> None:  # the child process that would run TensorRT
        assert onnx_path.is_file()
        built.append(params)
        target.write_bytes(b"engine")

    spec = ExperimentSpec(
        name="x",
        model={"source": "bert", "architecture": {"layers": 1, "hidden": 32, "heads": 2, "vocab_size": 2000}},
        payload={"texts": ["a", "a b c d e f g h i j", "a b c", "a b c d e f g h i j k l m n o p q r s t"]},
    )
    candidate = Candidate("trt", None, 1, 4, "local-gpu", "fp", padding=padding)
    export_model(spec.model, "onnx", 8, "fp", tmp_path / "cache")  # the real export, before torch meets a fake module
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.13.3.9"))
    monkeypatch.setattr(tensorrt_engine, "build_on", build_on)
    root = candidate_repository(
        spec,
        candidate,
        tmp_path / "repo",
        cache_dir=tmp_path / "cache",
        model_name="model",
        threads_per_instance=1,
        native=True,
        instance_kind="KIND_GPU",
        serving=ServingHardware("gpu", GPU_HOST),
    )
    (params,) = built
    assert params.sequence_lengths == length_profile(padded_lengths(spec.payload, padding))
    assert params.sequence_lengths == {"max": (22, 22, 22), "buckets": (4, 8, 22), "none": (3, 5, 22)}[padding]
    config = (root / "model" / "config.pbtxt").read_text()
    assert config.count("dims: [ -1 ]") == 2 and 'platform: "tensorrt_plan"' in config
