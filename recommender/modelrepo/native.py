"""config.pbtxt for Triton's native backends: what the serving image (containers/triton, NGC Triton; the SageMaker
Triton image) runs. The pip-wheel tritonserver of the local target has only the Python backend, so these configs are
rendered and unit tested here but served only by the image (docs/gpu.md says what is verified).

    pt       -> platform pytorch_libtorch  1/model.pt    inputs matched to forward()'s argument names
    onnx     -> platform onnxruntime_onnx  1/model.onnx
    trt      -> platform tensorrt_plan     1/model.plan  (an engine built for the image's TensorRT version and GPU)
    openvino -> backend openvino           1/model.onnx  (read by OpenVINO's ONNX frontend; default_model_filename)

Inputs declare the sequence as -1 (every export takes a dynamic sequence axis: modelrepo/export.py; a TensorRT
engine takes the lengths of its optimization profile); the batch dimension is Triton's, from max_batch_size, except
for openvino: its backend fixes the model's batch at max_batch_size and rejects any request of another batch, so it is
written `max_batch_size: 0` with the batch as an explicit dynamic dim (`[-1, -1]`), and a candidate asking for dynamic
batching there is refused (`native_refusal`).
`padding: none` sets no `allow_ragged_batch` here: a native backend would be handed the requests' rows flattened
into one tensor, which these models do not take, so Triton's dynamic batcher batches only requests of one length
(the Python backend's model.py pads within the batch instead: repository.render_config).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from recommender.candidates import Candidate
from recommender.errors import BuildError
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec


@dataclass(frozen=True)
class NativeBackend:
    name: str  # what run.backend stores, e.g. onnxruntime_onnx
    field: str  # "platform" or "backend" in config.pbtxt
    artifact_format: str  # the export it serves
    filename: str  # the file name the backend loads from the version folder
    batched: bool = True  # Triton batches for it (max_batch_size > 0); False: max_batch_size 0, batch dim -1


NATIVE_BACKENDS = {
    "pt": NativeBackend("pytorch_libtorch", "platform", "torchscript", "model.pt"),
    "onnx": NativeBackend("onnxruntime_onnx", "platform", "onnx", "model.onnx"),
    "trt": NativeBackend("tensorrt_plan", "platform", "tensorrt", "model.plan"),
    "openvino": NativeBackend("openvino", "backend", "openvino", "model.onnx", batched=False),
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


def native_refusal(candidate: Candidate) -> str | None:
    """Why `candidate` cannot be served by its native backend as it asks (None: it can)."""
    backend = native_backend(candidate.optimization)
    if backend.batched or candidate.dynamic_batching is None:
        return None
    return (
        f"Triton's {backend.name} backend rejects any request whose batch differs from max_batch_size, so it is "
        "served with max_batch_size 0 (the batch a dynamic dim) and cannot batch dynamically; "
        f"set variants.dynamic_batching: [false] for {candidate.optimization} on the docker and sagemaker targets"
    )


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
        f"max_batch_size: {candidate.max_batch_size if backend.batched else 0}",
    ]


def with_batch_dim(artifact: ModelArtifact, optimization: str) -> ModelArtifact:
    """The artifact's tensors with the batch as an explicit dynamic first dim where Triton does not batch (-1, -1)."""
    if native_backend(optimization).batched:
        return artifact

    def batch_first(tensors: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
        return tuple(replace(t, dims=(-1, *t.dims)) for t in tensors)

    return replace(artifact, inputs=batch_first(artifact.inputs), outputs=batch_first(artifact.outputs))


def engine_parameters(optimization: str, threads: int) -> dict[str, str]:
    """Backend parameters that size CPU threads like the Python-backend runner does (none for GPU-only backends)."""
    if optimization == "onnx":
        return {"intra_op_thread_count": str(threads), "inter_op_thread_count": "1"}
    if optimization == "openvino":
        return {"INFERENCE_NUM_THREADS": str(threads), "NUM_STREAMS": "1", "PERFORMANCE_HINT": "LATENCY"}
    if optimization == "pt":
        return {"INTRA_OP_THREAD_COUNT": str(threads), "INTER_OP_THREAD_COUNT": "1"}
    return {}
