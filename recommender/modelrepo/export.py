"""Export a model once per optimization (TorchScript, ONNX, a TensorRT engine built from the ONNX file on a GPU;
OpenVINO compiles the ONNX file directly), cached by a hash of the model spec and of the model's
content (the file's bytes, or the packaged model's version): a file changed in place is exported again."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import warnings
from dataclasses import asdict
from pathlib import Path

from recommender.errors import BuildError, CandidateSkipped
from recommender.hardware import ServingHardware, detect_hardware
from recommender.modelrepo.artifact import ArtifactFormat, ModelArtifact, TensorSpec
from recommender.modelrepo.model_source import load_torch_model, model_content
from recommender.modelrepo.tensorrt_engine import EngineParameters, engine_artifact, trt_skip_reason
from recommender.spec import ModelSpec

FORMAT_OF: dict[str, ArtifactFormat] = {"pt": "torchscript", "onnx": "onnx", "openvino": "openvino"}
# the openvino artifact is the ONNX export, read by OpenVINO's ONNX frontend (ov.Core().compile_model) at load
FILE_OF = {"torchscript": "model.pt", "onnx": "model.onnx", "openvino": "model.onnx"}
INPUT_NAMES = ("input_ids", "attention_mask")
OUTPUT_NAME = "embedding"


def export_model(
    spec: ModelSpec,
    optimization: str,
    sequence_length: int,
    fingerprint: str,
    cache_dir: Path,
    precision: str = "fp32",
    max_batch_size: int = 1,
    serving: ServingHardware | None = None,
) -> ModelArtifact:
    """The artifact for one optimization, exported on first use and read from the cache afterwards. `trt` builds a
    TensorRT engine from the ONNX export for `precision` and batch 1..`max_batch_size` on the GPU of `serving`
    (this host's, detected, when not given); CandidateSkipped with the true reason where that cannot be done."""
    if optimization == "trt":
        return _engine(spec, sequence_length, fingerprint, cache_dir, precision, max_batch_size, serving)
    fmt = FORMAT_OF[optimization]
    folder = Path(cache_dir) / f"{fingerprint}-{_content_tag(spec)}{optimization}"
    cached = _read_cached(folder)
    if cached is not None:
        return cached
    staging = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    artifact = _export(spec, fmt, sequence_length, staging)
    _write_signature(staging, artifact)
    shutil.rmtree(folder, ignore_errors=True)
    staging.rename(folder)
    exported = _read_cached(folder)
    assert exported is not None  # its signature was written above
    return exported


def _content_tag(spec: ModelSpec) -> str:
    """'<12 hex digits>-' of the model's content (bytes or packaged version); '' when the spec alone fixes it (bert)."""
    content = model_content(spec)
    return "" if content is None else hashlib.sha256(content.encode()).hexdigest()[:12] + "-"


def _engine(
    spec: ModelSpec,
    sequence_length: int,
    fingerprint: str,
    cache_dir: Path,
    precision: str,
    max_batch_size: int,
    serving: ServingHardware | None,
) -> ModelArtifact:
    """The TensorRT engine built from the ONNX export (skipped, with the reason, before anything is exported)."""
    if serving is None:
        hardware = detect_hardware()
        serving = ServingHardware("gpu" if hardware.gpus else "cpu", hardware)
    reason = trt_skip_reason(serving)
    if reason is not None:
        raise CandidateSkipped(reason)
    onnx = export_model(spec, "onnx", sequence_length, fingerprint, cache_dir)
    params = EngineParameters(tuple(t.name for t in onnx.inputs), sequence_length, max_batch_size, precision)
    return engine_artifact(onnx, params, serving, cache_dir)


def _export(spec: ModelSpec, fmt: ArtifactFormat, sequence_length: int, folder: Path) -> ModelArtifact:
    if spec.source in ("torchscript", "onnx"):
        return _user_file(spec, fmt, sequence_length, folder)
    model = load_torch_model(spec)
    example = _example_inputs(sequence_length)
    target = folder / FILE_OF[fmt]
    with warnings.catch_warnings():  # tracer and exporter deprecation chatter is not the user's concern
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            _trace(model, example, target)
        else:  # onnx, and openvino (which compiles the ONNX file)
            _to_onnx(model, example, target)
    hidden = _output_width(model, example)
    return _artifact(target, fmt, hidden, random_weights=spec.source == "bert")


def _example_inputs(sequence_length: int):
    import torch

    ids = torch.randint(1000, 2000, (2, sequence_length), dtype=torch.int64)
    return ids, torch.ones_like(ids)


def _trace(model, example, target: Path) -> None:
    import torch

    with torch.inference_mode(False), torch.no_grad():
        traced = torch.jit.trace(model, example, strict=False, check_trace=False)
    traced.save(str(target))


def _to_onnx(model, example, target: Path) -> None:
    import torch

    axes = {name: {0: "batch"} for name in (*INPUT_NAMES, OUTPUT_NAME)}
    with torch.no_grad():
        torch.onnx.export(
            model,
            example,
            str(target),
            input_names=list(INPUT_NAMES),
            output_names=[OUTPUT_NAME],
            dynamic_axes=axes,
            opset_version=17,
            dynamo=False,
        )


def _output_width(model, example) -> int:
    import torch

    with torch.no_grad():
        return int(model(*example).shape[-1])


def _user_file(spec: ModelSpec, fmt: ArtifactFormat, sequence_length: int, folder: Path) -> ModelArtifact:
    served = ("torchscript",) if spec.source == "torchscript" else ("onnx", "openvino")
    if fmt not in served:
        names = "`pt`" if spec.source == "torchscript" else "`onnx` and `openvino`"
        raise CandidateSkipped(f"a {spec.source} model file serves only the {names} optimization(s)")
    if spec.path is None or not spec.path.is_file():  # the spec requires a path for a model file
        raise BuildError(f"model file {spec.path} does not exist", hint="Fix model.path in the experiment file.")
    target = folder / FILE_OF[fmt]
    shutil.copyfile(spec.path, target)
    return _artifact(target, fmt, _user_output_width(target, "onnx" if fmt == "openvino" else fmt, sequence_length))


def _user_output_width(path: Path, fmt: str, sequence_length: int) -> int:
    """Run the user's model once on a dummy batch to learn its output width (and that it loads at all)."""
    try:
        if fmt == "torchscript":
            import torch

            model = torch.jit.load(str(path))
            return _output_width(model, _example_inputs(sequence_length))
        import numpy as np
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        ids = np.ones((2, sequence_length), dtype=np.int64)
        return int(session.run(None, {"input_ids": ids, "attention_mask": ids})[0].shape[-1])
    except Exception as exc:  # the user's file: any failure is a clear build error
        raise BuildError(
            f"model file {path} could not be run: {exc}",
            hint="The model must take input_ids and attention_mask (INT64 [batch, seq]) "
            "and return one FP32 [batch, width] tensor.",
        ) from exc


def _artifact(path: Path, fmt: ArtifactFormat, width: int, random_weights: bool = False) -> ModelArtifact:
    inputs = tuple(TensorSpec(name, "TYPE_INT64", (-1,)) for name in INPUT_NAMES)
    outputs = (TensorSpec(OUTPUT_NAME, "TYPE_FP32", (width,)),)
    return ModelArtifact(path, fmt, inputs, outputs, random_weights)


def _write_signature(folder: Path, artifact: ModelArtifact) -> None:
    data = asdict(artifact)
    data["path"] = artifact.path.name
    (folder / "signature.json").write_text(json.dumps(data, indent=2))


def _read_cached(folder: Path) -> ModelArtifact | None:
    signature = folder / "signature.json"
    if not signature.is_file():
        return None
    data = json.loads(signature.read_text())
    tensors = lambda items: tuple(TensorSpec(t["name"], t["dtype"], tuple(t["dims"])) for t in items)
    return ModelArtifact(
        folder / data["path"],
        data["format"],
        tensors(data["inputs"]),
        tensors(data["outputs"]),
        data.get("random_weights", False),
    )
