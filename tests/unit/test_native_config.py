"""config.pbtxt for Triton's native backends (the serving image of the docker and sagemaker targets): one snapshot per
backend, the layout of a native repository, and the backend stored with a run. The pip-wheel tritonserver here has only
the Python backend, so Triton's acceptance of these configs is not tested here (docs/gpu.md).

Snapshots live in tests/unit/snapshots/config-<backend>.pbtxt and are compared exactly. After an intended change,
rewrite them with `UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_native_config.py` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from recommender.candidates import Candidate
from recommender.errors import BuildError
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.repository import render_native_config, serving_backend, write_model_repository
from recommender.spec import DynamicBatching

SNAPSHOTS = Path(__file__).parent / "snapshots"
INPUTS = (TensorSpec("input_ids", "TYPE_INT64", (-1,)), TensorSpec("attention_mask", "TYPE_INT64", (-1,)))
OUTPUTS = (TensorSpec("embedding", "TYPE_FP32", (384,)),)
CASES = {  # optimization: (artifact format, file, instance kind, GPUs)
    "pt": ("torchscript", "model.pt", "KIND_GPU", (0,)),
    "onnx": ("onnx", "model.onnx", "KIND_CPU", ()),
    "trt": ("tensorrt", "model.plan", "KIND_GPU", (0, 1)),
    "openvino": ("openvino", "model.onnx", "KIND_CPU", ()),
}


def artifact_for(tmp_path: Path, optimization: str) -> ModelArtifact:
    fmt, name, _, _ = CASES[optimization]
    path = tmp_path / "export" / name
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b"model bytes")
    return ModelArtifact(path, fmt, INPUTS, OUTPUTS)


def candidate(optimization: str, count: int = 2, batching: bool | None = None) -> Candidate:
    """Dynamic batching on, except for openvino (its native backend does not batch) unless `batching` says."""
    on = optimization != "openvino" if batching is None else batching
    dynamic = DynamicBatching(max_queue_delay_microseconds=200) if on else None
    return Candidate(optimization, dynamic, count, 16, "local-gpu")


def matches_snapshot(name: str, text: str) -> bool:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.write_text(text)
    return text == path.read_text()


@pytest.mark.parametrize("optimization", list(CASES))
def test_native_config_matches_its_snapshot(tmp_path: Path, optimization: str) -> None:
    _, _, kind, gpus = CASES[optimization]
    text = render_native_config(candidate(optimization), artifact_for(tmp_path, optimization), "model", 2, kind, gpus)
    assert matches_snapshot(f"config-{serving_backend(optimization, native=True)}.pbtxt", text)


@pytest.mark.parametrize(
    ("optimization", "field"),
    [
        ("pt", 'platform: "pytorch_libtorch"'),
        ("onnx", 'platform: "onnxruntime_onnx"'),
        ("trt", 'platform: "tensorrt_plan"'),
    ],
)
def test_each_optimization_names_its_native_backend_and_a_dynamic_sequence(tmp_path, optimization, field) -> None:
    """Every export takes a dynamic sequence axis: the config declares the sequence -1 (it was fixed to the payload's
    length, so a request of another length was refused by Triton)."""
    text = render_native_config(candidate(optimization), artifact_for(tmp_path, optimization), "m", 1)
    assert field in text and "max_batch_size: 16" in text
    assert text.count("dims: [ -1 ]") == 2 and "dims: [ 384 ]" in text
    assert 'backend: "python"' not in text


def test_native_openvino_takes_the_batch_as_a_dynamic_dim_not_from_max_batch_size(tmp_path: Path) -> None:
    """The openvino backend fixes the model's batch at max_batch_size and rejects every other request batch (a probe
    of 1 row against max_batch_size 16 fails): it is written max_batch_size 0 with dims [-1, seq], no batcher."""
    text = render_native_config(candidate("openvino"), artifact_for(tmp_path, "openvino"), "m", 1)
    assert 'backend: "openvino"' in text and "max_batch_size: 0\n" in text and "max_batch_size: 16" not in text
    assert text.count("dims: [ -1, -1 ]") == 2 and "dims: [ -1, 384 ]" in text and "dynamic_batching" not in text


def test_native_openvino_refuses_dynamic_batching_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match=r"cannot batch dynamically; set variants\.dynamic_batching: \[false\]"):
        render_native_config(candidate("openvino", batching=True), artifact_for(tmp_path, "openvino"), "m", 1)


def test_gpu_instances_are_placed_one_group_per_gpu(tmp_path: Path) -> None:
    text = render_native_config(candidate("trt", count=3), artifact_for(tmp_path, "trt"), "m", 1, "KIND_GPU", (0, 1))
    assert (
        "count: 2\n    kind: KIND_GPU\n    gpus: [ 0 ]" in text
        and "count: 1\n    kind: KIND_GPU\n    gpus: [ 1 ]" in text
    )


def test_a_wrong_artifact_for_the_backend_is_a_build_error(tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="needs a tensorrt artifact for tensorrt_plan, got onnx"):
        render_native_config(candidate("trt"), artifact_for(tmp_path, "onnx"), "m", 1)


@pytest.mark.parametrize("optimization", list(CASES))
def test_native_repository_holds_the_config_and_the_backends_file_only(tmp_path: Path, optimization: str) -> None:
    _, name, kind, gpus = CASES[optimization]
    root = write_model_repository(
        candidate(optimization),
        artifact_for(tmp_path, optimization),
        tmp_path / "repo",
        threads_per_instance=1,
        copy_artifact=True,
        instance_kind=kind,
        gpus=gpus,
        native=True,
    )
    assert sorted(p.name for p in (root / "model" / "1").iterdir()) == [name]
    assert serving_backend(optimization, native=True) in (root / "model" / "config.pbtxt").read_text()


def test_openvino_is_served_on_cpu_instances_on_a_gpu_run(tmp_path: Path) -> None:
    root = write_model_repository(
        candidate("openvino"),
        artifact_for(tmp_path, "openvino"),
        tmp_path / "repo",
        threads_per_instance=1,
        instance_kind="KIND_GPU",
        gpus=(0,),
        native=True,
    )
    text = (root / "model" / "config.pbtxt").read_text()
    assert "kind: KIND_CPU" in text and "KIND_GPU" not in text


@pytest.mark.parametrize(
    ("optimization", "native", "expected"),
    [
        ("pt", True, "pytorch_libtorch"),
        ("onnx", True, "onnxruntime_onnx"),
        ("trt", True, "tensorrt_plan"),
        ("openvino", True, "openvino"),
        ("pt", False, "python:torchscript"),
        ("trt", False, "python:tensorrt"),
    ],
)
def test_the_backend_stored_with_a_run(optimization: str, native: bool, expected: str) -> None:
    assert serving_backend(optimization, native) == expected
