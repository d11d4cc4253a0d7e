"""config.pbtxt for Triton's native backends: what the serving image (containers/triton, NGC Triton; the SageMaker
Triton image) runs. The pip-wheel tritonserver of the local target has only the Python backend, so these configs are
rendered and unit tested here but served only by the image (docs/gpu.md says what is verified).

    pt       -> platform pytorch_libtorch  1/model.pt    inputs matched to forward()'s argument names
    onnx     -> platform onnxruntime_onnx  1/model.onnx
    trt      -> platform tensorrt_plan     1/model.plan  (an engine built for the image's TensorRT version and GPU)
    openvino -> backend openvino           1/model.onnx  (read by OpenVINO's ONNX frontend; default_model_filename)

Inputs are declared at the payload's sequence length (the exports trace and build at that length); the batch
dimension is Triton's, from max_batch_size.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from recommender.candidates import Candidate
from recommender.errors import BuildError
from recommender.modelrepo.artifact import ModelArtifact


@dataclass(frozen=True)
class NativeBackend:
    name: str  # what run.backend stores, e.g. onnxruntime_onnx
    field: str  # "platform" or "backend" in config.pbtxt
    artifact_format: str  # the export it serves
    filename: str  # the file name the backend loads from the version folder


NATIVE_BACKENDS = {
    "pt": NativeBackend("pytorch_libtorch", "platform", "torchscript", "model.pt"),
    "onnx": NativeBackend("onnxruntime_onnx", "platform", "onnx", "model.onnx"),
    "trt": NativeBackend("tensorrt_plan", "platform", "tensorrt", "model.plan"),
    "openvino": NativeBackend("openvino", "backend", "openvino", "model.onnx"),
}


def native_backend(optimization: str) -> NativeBackend:
    """The native Triton backend serving `optimization`; BuildError for one without."""
    try:
        return NATIVE_BACKENDS[optimization]
    except KeyError:
        raise BuildError(
            f"optimization {optimization!r} has no native Triton backend",
            hint=f"use one of {', '.join(NATIVE_BACKENDS)}",
        ) from None


def header_lines(candidate: Candidate, artifact: ModelArtifact, model_name: str) -> list[str]:
    """name, platform or backend, default_model_filename, max_batch_size."""
    backend = native_backend(candidate.optimization)
    if artifact.format != backend.artifact_format:
        raise BuildError(
            f"candidate {candidate.name} needs a {backend.artifact_format} artifact for {backend.name}, "
            f"got {artifact.format}"
        )
    return [
        f'name: "{model_name}"',
        f'{backend.field}: "{backend.name}"',
        f'default_model_filename: "{backend.filename}"',
        f"max_batch_size: {candidate.max_batch_size}",
    ]


def at_sequence_length(artifact: ModelArtifact, sequence_length: int) -> ModelArtifact:
    """The artifact with its variable (-1) input dims fixed to the sequence length it was exported at."""
    if sequence_length < 1:
        raise BuildError(f"sequence_length must be at least 1 for a native backend config, got {sequence_length}")
    inputs = tuple(replace(t, dims=tuple(sequence_length if d == -1 else d for d in t.dims)) for t in artifact.inputs)
    return replace(artifact, inputs=inputs)


def engine_parameters(optimization: str, threads: int) -> dict[str, str]:
    """Backend parameters that size CPU threads like the Python-backend runner does (none for GPU-only backends)."""
    if optimization == "onnx":
        return {"intra_op_thread_count": str(threads), "inter_op_thread_count": "1"}
    if optimization == "openvino":
        return {"INFERENCE_NUM_THREADS": str(threads), "NUM_STREAMS": "1", "PERFORMANCE_HINT": "LATENCY"}
    if optimization == "pt":
        return {"INTRA_OP_THREAD_COUNT": str(threads), "INTER_OP_THREAD_COUNT": "1"}
    return {}
