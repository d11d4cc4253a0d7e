"""config.pbtxt rendering and the model repository layout (no server; Triton's acceptance is the integration tier)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from recommender.candidates import Candidate
from recommender.errors import BuildError
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.repository import default_threads_per_instance, render_config, write_model_repository
from recommender.spec import DynamicBatching

INPUTS = (TensorSpec("input_ids", "TYPE_INT64", (-1,)), TensorSpec("attention_mask", "TYPE_INT64", (-1,)))
OUTPUTS = (TensorSpec("embedding", "TYPE_FP32", (8,)),)


@pytest.fixture
def artifact(tmp_path: Path) -> ModelArtifact:
    path = tmp_path / "export" / "model.pt"
    path.parent.mkdir()
    path.write_bytes(b"torchscript bytes")
    return ModelArtifact(path, "torchscript", INPUTS, OUTPUTS)


def candidate(batching: DynamicBatching | None = None, count: int = 1, mbs: int = 8, opt: str = "pt") -> Candidate:
    return Candidate(opt, batching, count, mbs, "local")


def braces_balance(text: str) -> bool:
    depth = {"{": 0, "[": 0}
    closing = {"}": "{", "]": "["}
    for char in re.sub(r'"[^"]*"', "", text):
        if char in depth:
            depth[char] += 1
        elif char in closing:
            depth[closing[char]] -= 1
            if depth[closing[char]] < 0:
                return False
    return all(value == 0 for value in depth.values())


def block(text: str, name: str) -> str | None:
    match = re.search(rf"^{name} [\[{{]\n(.*?)^[\]}}]", text, flags=re.S | re.M)
    return match.group(1) if match else None


def test_renders_header_tensors_and_python_backend(artifact: ModelArtifact) -> None:
    text = render_config(candidate(mbs=16), artifact, "bert", threads_per_instance=2)
    assert text.startswith('name: "bert"\nbackend: "python"\nmax_batch_size: 16\n')
    inputs = block(text, "input")
    assert inputs is not None and inputs.count("data_type: TYPE_INT64") == 2 and inputs.count("dims: [ -1 ]") == 2
    assert 'name: "embedding"\n    data_type: TYPE_FP32\n    dims: [ 8 ]' in block(text, "output")
    assert braces_balance(text)


def test_dynamic_batching_off_has_no_block(artifact: ModelArtifact) -> None:
    text = render_config(candidate(None), artifact, "model", 1)
    assert "dynamic_batching" not in text
    assert braces_balance(text)


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (DynamicBatching(), "  max_queue_delay_microseconds: 100\n"),
        (DynamicBatching(max_queue_delay_microseconds=0), "  max_queue_delay_microseconds: 0\n"),
        (
            DynamicBatching(max_queue_delay_microseconds=500, preferred_batch_size=[4, 8]),
            "  max_queue_delay_microseconds: 500\n  preferred_batch_size: [ 4, 8 ]\n",
        ),
    ],
)
def test_dynamic_batching_on(artifact: ModelArtifact, settings: DynamicBatching, expected: str) -> None:
    text = render_config(candidate(settings), artifact, "model", 1)
    assert block(text, "dynamic_batching") == expected
    assert braces_balance(text)


@pytest.mark.parametrize("count", [1, 2, 4, 16])
@pytest.mark.parametrize("kind", ["KIND_CPU", "KIND_GPU"])
def test_instance_group(artifact: ModelArtifact, count: int, kind: str) -> None:
    text = render_config(candidate(count=count), artifact, "model", 1, instance_kind=kind)
    assert block(text, "instance_group") == f"  {{\n    count: {count}\n    kind: {kind}\n  }}\n"


@pytest.mark.parametrize(("opt", "fmt", "threads"), [("pt", "torchscript", 1), ("onnx", "onnx", 3)])
def test_parameters_tell_model_py_the_artifact(artifact: ModelArtifact, opt: str, fmt: str, threads: int) -> None:
    onnx = ModelArtifact(artifact.path, fmt, INPUTS, OUTPUTS)
    text = render_config(candidate(opt=opt), onnx, "model", threads)
    parameters = dict(re.findall(r'key: "(\w+)"\n  value: \{ string_value: "([^"]*)" \}', text))
    assert parameters == {"artifact_file": "model.pt", "artifact_format": fmt, "intra_op_threads": str(threads)}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"candidate": candidate(opt="trt")}, "needs a tensorrt artifact"),
        ({"candidate": candidate(opt="onnx")}, "needs a onnx artifact"),
        ({"instance_kind": "KIND_TPU"}, "unknown instance kind"),
        ({"threads_per_instance": 0}, "at least 1"),
        ({"model_name": 'bad"name'}, "cannot be used"),
    ],
)
def test_unservable_input_is_a_build_error(artifact: ModelArtifact, change: dict, message: str) -> None:
    arguments = {
        "candidate": candidate(),
        "artifact": artifact,
        "model_name": "model",
        "threads_per_instance": 1,
    } | change
    with pytest.raises(BuildError, match=message):
        render_config(**arguments)


def test_unknown_dtype_is_a_build_error(artifact: ModelArtifact) -> None:
    broken = ModelArtifact(artifact.path, "torchscript", (TensorSpec("x", "FP32", (4,)),), OUTPUTS)
    with pytest.raises(BuildError, match="unknown Triton data type"):
        render_config(candidate(), broken, "model", 1)


@pytest.mark.parametrize(("cores", "count", "expected"), [(8, 1, 8), (8, 2, 4), (8, 3, 2), (2, 4, 1), (1, 1, 1)])
def test_default_threads_divide_the_cores(
    monkeypatch: pytest.MonkeyPatch, cores: int, count: int, expected: int
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: set(range(cores)), raising=False)
    assert default_threads_per_instance(count) == expected


@pytest.mark.parametrize("copy", [False, True])
def test_write_model_repository_layout(tmp_path: Path, artifact: ModelArtifact, copy: bool) -> None:
    root = write_model_repository(
        candidate(count=2), artifact, tmp_path / "repo", "bert", threads_per_instance=3, copy_artifact=copy
    )
    version = root / "bert" / "1"
    assert (root / "bert" / "config.pbtxt").read_text() == render_config(candidate(count=2), artifact, "bert", 3)
    assert "class TritonPythonModel" in (version / "model.py").read_text()
    placed = version / "model.pt"
    assert placed.is_symlink() is not copy
    assert placed.read_bytes() == b"torchscript bytes"


def test_write_model_repository_is_rewritable(tmp_path: Path, artifact: ModelArtifact) -> None:
    write_model_repository(candidate(), artifact, tmp_path, copy_artifact=True)
    write_model_repository(candidate(), artifact, tmp_path)
    assert (tmp_path / "model" / "1" / "model.pt").is_symlink()


def test_missing_artifact_is_a_build_error(tmp_path: Path, artifact: ModelArtifact) -> None:
    missing = ModelArtifact(tmp_path / "nope.pt", "torchscript", INPUTS, OUTPUTS)
    with pytest.raises(BuildError, match="does not exist"):
        write_model_repository(candidate(), missing, tmp_path / "repo")


def test_threads_leave_reserved_cores_to_the_load_generator():
    from recommender.modelrepo.repository import available_cores, default_threads_per_instance

    cores = available_cores()
    assert default_threads_per_instance(1) == cores
    assert default_threads_per_instance(1, reserved_cores=1) == max(1, cores - 1)
    assert default_threads_per_instance(2, reserved_cores=cores) == 1  # never below one thread
