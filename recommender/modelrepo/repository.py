"""Write a real Triton model repository for one candidate: config.pbtxt plus the artifact, served either by the generic
Python-backend model.py (the local target's pip-wheel tritonserver) or by Triton's native backends (the image of the
docker and sagemaker targets: modelrepo/native.py)."""

from __future__ import annotations

import json
import re
import shutil
from importlib import resources
from pathlib import Path

from recommender.candidates import Candidate
from recommender.errors import BuildError
from recommender.hardware import ServingHardware, available_cores, gpu_instance_groups
from recommender.load.payload import length_profile, padded_lengths
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.export import export_model
from recommender.modelrepo.native import (
    engine_parameters,
    header_lines,
    native_backend,
    native_refusal,
    with_batch_dim,
)
from recommender.spec import ExperimentSpec

# The artifact format each optimization is served from in the Python backend
ARTIFACT_FORMATS = {"pt": "torchscript", "onnx": "onnx", "openvino": "openvino", "trt": "tensorrt"}
# What runs the model inside the Python backend's model.py, per optimization (stored with every run as its backend)
PYTHON_RUNNERS = {"pt": "torchscript", "onnx": "onnxruntime", "openvino": "openvino", "trt": "tensorrt"}
INSTANCE_KINDS = ("KIND_CPU", "KIND_GPU")
CPU_ONLY = frozenset({"openvino"})  # served on CPU instances even where the run's accelerator is a GPU
TRITON_DTYPES = frozenset(
    f"TYPE_{name}"
    for name in (
        "BOOL",
        "UINT8",
        "UINT16",
        "UINT32",
        "UINT64",
        "INT8",
        "INT16",
        "INT32",
        "INT64",
        "FP16",
        "FP32",
        "FP64",
        "BF16",
        "STRING",
    )
)
_SAFE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.\-:]*$")


def default_threads_per_instance(instance_group_count: int, reserved_cores: int = 0) -> int:
    """Intra-op threads per instance so that all instances together do not oversubscribe the cores.

    `reserved_cores` are left to something else on the same host (the load generator, for the local target):
    on a 2-core host, 2 intra-op threads competing with Locust made a small BERT 15-100x slower
    (docs/benchmarks.md), while 1 thread ran at its normal speed.
    """
    return max(1, (available_cores() - reserved_cores) // max(1, instance_group_count))


def size_threads(instance_group_count: int, vcpus: int | None = None, reserved_cores: int = 0) -> int:
    """The one sizing of a candidate's intra-op threads, for the pipeline and the deliverable: the serving host's
    `vcpus` (the deployment instance's, from the catalog) shared by the instances, or this host's cores when None;
    `reserved_cores` only where the load generator shares the serving host (the local target: 1; a deliverable
    serves without our load on its host: 0)."""
    if not vcpus:
        return default_threads_per_instance(instance_group_count, reserved_cores)
    return max(1, (vcpus - reserved_cores) // max(1, instance_group_count))


def python_backend_name(optimization: str) -> str:
    """The backend that serves `optimization` in a Python-backend repository, e.g. python:onnxruntime."""
    return f"python:{PYTHON_RUNNERS[optimization]}"


def serving_backend(optimization: str, native: bool) -> str:
    """What serves `optimization` (stored with the run as run.backend): a native Triton backend such as
    onnxruntime_onnx, or the Python-backend runner such as python:onnxruntime."""
    return native_backend(optimization).name if native else python_backend_name(optimization)


def render_native_config(
    candidate: Candidate,
    artifact: ModelArtifact,
    model_name: str,
    threads_per_instance: int,
    instance_kind: str = "KIND_CPU",
    gpus: tuple[int, ...] = (),
) -> str:
    """The config.pbtxt text for `candidate` served by Triton's native backend for its optimization
    (modelrepo/native.py): the sequence a dynamic (-1) dim, as the exports take it."""
    _check_common(artifact, model_name, threads_per_instance, instance_kind)
    if (refusal := native_refusal(candidate)) is not None:
        raise BuildError(refusal)
    artifact = with_batch_dim(artifact, candidate.optimization)
    sections = [
        *header_lines(candidate, artifact, model_name),
        _render_tensors("input", artifact.inputs),
        _render_tensors("output", artifact.outputs),
        _render_dynamic_batching(candidate),
        render_instance_group(candidate.instance_group_count, instance_kind, gpus),
        _render_parameters(engine_parameters(candidate.optimization, threads_per_instance)),
    ]
    return "\n".join(section for section in sections if section) + "\n"


def render_config(
    candidate: Candidate,
    artifact: ModelArtifact,
    model_name: str,
    threads_per_instance: int,
    instance_kind: str = "KIND_CPU",
    gpus: tuple[int, ...] = (),
) -> str:
    """The config.pbtxt text for `candidate` served by the generic Python-backend model.py; KIND_GPU instances are
    spread over `gpus` (all visible GPUs when empty: Triton's default). `padding: none` marks the inputs
    `allow_ragged_batch`: the dynamic batcher then batches requests of different lengths, and model.py pads them
    within the batch."""
    _check_servable(candidate, artifact, model_name, threads_per_instance, instance_kind)
    sections = [
        f'name: "{model_name}"',
        'backend: "python"',
        f"max_batch_size: {candidate.max_batch_size}",
        _render_tensors("input", artifact.inputs, ragged=candidate.padding == "none"),
        _render_tensors("output", artifact.outputs),
        _render_dynamic_batching(candidate),
        render_instance_group(candidate.instance_group_count, instance_kind, gpus),
        _render_parameters(
            {
                "artifact_file": artifact.path.name,
                "artifact_format": artifact.format,
                "intra_op_threads": str(threads_per_instance),
            }
        ),
    ]
    return "\n".join(section for section in sections if section) + "\n"


def candidate_repository(
    spec: ExperimentSpec,
    candidate: Candidate,
    root: Path,
    *,
    cache_dir: Path,
    model_name: str,
    threads_per_instance: int,
    native: bool,
    instance_kind: str = "KIND_CPU",
    gpus: tuple[int, ...] = (),
    serving: ServingHardware | None = None,
    copy_artifact: bool = False,
) -> Path:
    """A candidate's Triton repository, the one builder of the pipeline and the deliverable: the model exported for
    it (read from `cache_dir` after the first time; a TensorRT engine on the GPU of `serving`, this host's when None)
    and written under `root` (`native`: for Triton's native backends; `copy_artifact`: self-contained)."""
    artifact = export_model(
        spec.model,
        candidate.optimization,
        length_profile(padded_lengths(spec.payload, candidate.padding)),
        candidate.model_fingerprint,
        cache_dir,
        candidate.precision,
        candidate.max_batch_size,
        serving,
    )
    return write_model_repository(
        candidate,
        artifact,
        root,
        model_name,
        threads_per_instance=threads_per_instance,
        copy_artifact=copy_artifact,
        instance_kind=instance_kind,
        gpus=gpus,
        native=native,
    )


def write_model_repository(
    candidate: Candidate,
    artifact: ModelArtifact,
    root: Path,
    model_name: str = "model",
    threads_per_instance: int | None = None,
    copy_artifact: bool = False,
    instance_kind: str = "KIND_CPU",
    gpus: tuple[int, ...] = (),
    native: bool = False,
) -> Path:
    """Write root/<model_name>/{config.pbtxt, 1/model.py, 1/<artifact>}; returns the repository root. `native`: a
    native-backend repository, root/<model_name>/{config.pbtxt, 1/<backend's file>}.

    The artifact is symlinked by default (cheap, one export shared by many candidates) and copied
    when `copy_artifact` is set (a self-contained, deployable repository: the deliverable export).
    """
    threads = threads_per_instance or default_threads_per_instance(candidate.instance_group_count)
    if candidate.optimization in CPU_ONLY:
        instance_kind, gpus = "KIND_CPU", ()
    if native:
        config = render_native_config(candidate, artifact, model_name, threads, instance_kind, gpus)
        filename = native_backend(candidate.optimization).filename
    else:
        config = render_config(candidate, artifact, model_name, threads, instance_kind, gpus)
        filename = artifact.path.name
    if not artifact.path.is_file():
        raise BuildError(
            f"model artifact {artifact.path} does not exist", hint="export the model before writing the repository"
        )
    version_dir = Path(root) / model_name / "1"
    try:
        version_dir.mkdir(parents=True, exist_ok=True)
        (version_dir.parent / "config.pbtxt").write_text(config)
        if not native:
            _write_template(version_dir / "model.py")
        _place_artifact(artifact.path, version_dir / filename, copy_artifact)
    except OSError as error:
        raise BuildError(
            f"cannot write model repository under {root}: {error}", hint="check the path and free disk space"
        ) from error
    return Path(root)


def _check_servable(candidate: Candidate, artifact: ModelArtifact, model_name: str, threads: int, kind: str) -> None:
    expected = ARTIFACT_FORMATS.get(candidate.optimization)
    if expected is None:
        raise BuildError(
            f"optimization {candidate.optimization!r} is not served by the Python backend",
            hint=f"use one of {', '.join(ARTIFACT_FORMATS)}",
        )
    if artifact.format != expected:
        raise BuildError(f"candidate {candidate.name} needs a {expected} artifact, got {artifact.format}")
    _check_common(artifact, model_name, threads, kind)


def _check_common(artifact: ModelArtifact, model_name: str, threads: int, kind: str) -> None:
    if kind not in INSTANCE_KINDS:
        raise BuildError(f"unknown instance kind {kind!r}", hint=f"use one of {', '.join(INSTANCE_KINDS)}")
    if threads < 1:
        raise BuildError(f"threads_per_instance must be at least 1, got {threads}")
    if not artifact.inputs or not artifact.outputs:
        raise BuildError(f"artifact {artifact.path.name} declares no inputs or no outputs")
    for name in [model_name, *(t.name for t in artifact.inputs + artifact.outputs)]:
        if not _SAFE_NAME.match(name):
            raise BuildError(
                f"name {name!r} cannot be used in a Triton config", hint="use letters, digits, '_', '.', '-'"
            )


def _render_tensors(section: str, tensors: tuple[TensorSpec, ...], ragged: bool = False) -> str:
    blocks = []
    for tensor in tensors:
        if tensor.dtype not in TRITON_DTYPES:
            raise BuildError(f"tensor {tensor.name!r} has unknown Triton data type {tensor.dtype!r}")
        dims = ", ".join(str(dim) for dim in tensor.dims)
        ragged_line = "\n    allow_ragged_batch: true" if ragged else ""
        blocks.append(
            f'  {{\n    name: "{tensor.name}"\n    data_type: {tensor.dtype}\n    dims: [ {dims} ]{ragged_line}\n  }}'
        )
    return f"{section} [\n" + ",\n".join(blocks) + "\n]"


def _render_dynamic_batching(candidate: Candidate) -> str:
    settings = candidate.dynamic_batching
    if settings is None:
        return ""
    lines = [f"  max_queue_delay_microseconds: {settings.max_queue_delay_microseconds}"]
    if settings.preferred_batch_size:
        sizes = ", ".join(str(size) for size in settings.preferred_batch_size)
        lines.append(f"  preferred_batch_size: [ {sizes} ]")
    return "dynamic_batching {\n" + "\n".join(lines) + "\n}"


def render_instance_group(count: int, kind: str, gpus: tuple[int, ...] = ()) -> str:
    """instance_group with `count` instances; KIND_GPU on listed `gpus` places them round-robin, one group per GPU."""
    if kind != "KIND_GPU" or not gpus:
        groups = [f"  {{\n    count: {count}\n    kind: {kind}\n  }}"]
    else:
        groups = [
            f"  {{\n    count: {n}\n    kind: KIND_GPU\n    gpus: [ {', '.join(map(str, ids))} ]\n  }}"
            for n, ids in gpu_instance_groups(count, gpus)
        ]
    return "instance_group [\n" + ",\n".join(groups) + "\n]"


def _render_parameters(values: dict[str, str]) -> str:
    return "\n".join(
        f'parameters: {{\n  key: "{key}"\n  value: {{ string_value: {json.dumps(value)} }}\n}}'
        for key, value in values.items()
    )


def _write_template(destination: Path) -> None:
    template = resources.files("recommender.modelrepo") / "templates" / "model.py"
    destination.write_text(template.read_text())


def _place_artifact(source: Path, destination: Path, copy: bool) -> None:
    if destination.is_symlink() or destination.exists():
        destination.unlink()
    if copy:
        shutil.copy2(source, destination)
    else:
        destination.symlink_to(source.resolve())
