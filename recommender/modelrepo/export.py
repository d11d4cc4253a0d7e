"""Export a model once per optimization (TorchScript, ONNX, a TensorRT engine built from the ONNX file on a GPU;
OpenVINO compiles the ONNX file directly), cached by a hash of the model spec and of the model's
content (the file's bytes, or the packaged model's version): a file changed in place is exported again.

Every export takes a dynamic sequence axis (the requests' lengths differ: variants.padding). ONNX declares the batch
and the sequence as dynamic axes (OpenVINO reads that file, so its shape is dynamic too); a TorchScript trace records
one example's shapes, so it is traced at the longest length and checked against the model at every other length it
serves (`lengths`), and a trace that baked a length in is a BuildError; a TensorRT engine's optimization profile is
(shortest, median, longest) of `lengths` (tensorrt_engine.EngineParameters)."""

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
# the cache folder's suffix: exports with a dynamic sequence axis (a folder of an earlier fixed-length export is not
# read)
DYNAMIC_SEQUENCE = "dynseq"
# lengths every TorchScript trace is also checked at, beside the ones it serves: a trace is known dynamic before it is
# cached, whatever the payload of the run that exported it
CHECKED_LENGTHS = (3, 16, 77)
TRACE_TOLERANCE = 1e-4  # max abs difference of a trace's output from the model's at another length (fp32: ~1e-6)


def export_model(
    spec: ModelSpec,
    optimization: str,
    lengths: int | tuple[int, int, int],
    fingerprint: str,
    cache_dir: Path,
    precision: str = "fp32",
    max_batch_size: int = 1,
    serving: ServingHardware | None = None,
) -> ModelArtifact:
    """The artifact for one optimization, exported on first use and read from the cache afterwards, serving the
    sequence `lengths` (shortest, median, longest; one int: that length only). `trt` builds a TensorRT engine from
    the ONNX export for `precision`, batch 1..`max_batch_size` and those lengths on the GPU of `serving` (this
    host's, detected, when not given); CandidateSkipped with the true reason where that cannot be done."""
    profile = (lengths, lengths, lengths) if isinstance(lengths, int) else lengths
    if optimization == "trt":
        return _engine(spec, profile, fingerprint, cache_dir, precision, max_batch_size, serving)
    fmt = FORMAT_OF[optimization]
    folder = Path(cache_dir) / f"{fingerprint}-{_content_tag(spec)}{optimization}-{DYNAMIC_SEQUENCE}"
    cached = _read_cached(folder)
    if cached is not None:
        return cached
    staging = folder.with_name(folder.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    artifact = _export(spec, fmt, profile, staging)
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
    lengths: tuple[int, int, int],
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
    onnx = export_model(spec, "onnx", lengths, fingerprint, cache_dir)
    params = EngineParameters(tuple(t.name for t in onnx.inputs), lengths, max_batch_size, precision)
    return engine_artifact(onnx, params, serving, cache_dir)


def _export(spec: ModelSpec, fmt: ArtifactFormat, lengths: tuple[int, int, int], folder: Path) -> ModelArtifact:
    if spec.source in ("torchscript", "onnx"):
        return _user_file(spec, fmt, lengths, folder)
    model = load_torch_model(spec)
    example = _example_inputs(max(lengths))
    target = folder / FILE_OF[fmt]
    with warnings.catch_warnings():  # tracer and exporter deprecation chatter is not the user's concern
        warnings.simplefilter("ignore")
        if fmt == "torchscript":
            _trace(model, example, target, sorted({*lengths, *CHECKED_LENGTHS}))
        else:  # onnx, and openvino (which compiles the ONNX file)
            _to_onnx(model, example, target)
    hidden = _output_width(model, example)
    return _artifact(target, fmt, hidden, random_weights=spec.source == "bert")


def _example_inputs(sequence_length: int):
    import torch

    ids = torch.randint(1000, 2000, (2, sequence_length), dtype=torch.int64)
    return ids, torch.ones_like(ids)


def _trace(model, example, target: Path, checked: list[int]) -> None:
    import torch

    with torch.inference_mode(False), torch.no_grad():
        traced = torch.jit.trace(model, example, strict=False, check_trace=False)
        check_trace_lengths(model, traced, checked)
    traced.save(str(target))


def check_trace_lengths(model, traced, lengths: list[int]) -> None:
    """The trace's output against the model's at each of `lengths` (a batch of 2 rows, the second half padded); a
    BuildError naming the length where a trace that baked its example's length in differs or fails."""
    import torch

    generator = torch.Generator().manual_seed(0)
    for length in lengths:
        ids = torch.randint(1000, 2000, (2, length), dtype=torch.int64, generator=generator)
        mask = torch.ones_like(ids)
        mask[1, (length + 1) // 2 :] = 0
        try:
            error = float((traced(ids, mask) - model(ids, mask)).abs().max())
        except Exception as exc:  # a shape baked into the graph: the trace cannot run at this length
            raise BuildError(
                f"the TorchScript trace does not run at sequence length {length}: {exc}",
                hint="the model's forward fixes a length when traced; export it with a dynamic sequence axis",
            ) from exc
        if not error <= TRACE_TOLERANCE:
            raise BuildError(
                f"the TorchScript trace differs from the model by {error:.2g} at sequence length {length} "
                f"(at most {TRACE_TOLERANCE:g}): the trace baked its example's length in",
                hint="the model's forward fixes a length when traced; export it with a dynamic sequence axis",
            )


def _to_onnx(model, example, target: Path) -> None:
    import torch

    axes = {name: {0: "batch", 1: "sequence"} for name in INPUT_NAMES} | {OUTPUT_NAME: {0: "batch"}}
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


def _user_file(spec: ModelSpec, fmt: ArtifactFormat, lengths: tuple[int, int, int], folder: Path) -> ModelArtifact:
    served = ("torchscript",) if spec.source == "torchscript" else ("onnx", "openvino")
    if fmt not in served:
        names = "`pt`" if spec.source == "torchscript" else "`onnx` and `openvino`"
        raise CandidateSkipped(f"a {spec.source} model file serves only the {names} optimization(s)")
    if spec.path is None or not spec.path.is_file():  # the spec requires a path for a model file
        raise BuildError(f"model file {spec.path} does not exist", hint="Fix model.path in the experiment file.")
    target = folder / FILE_OF[fmt]
    shutil.copyfile(spec.path, target)
    fmt_run = "onnx" if fmt == "openvino" else fmt
    widths = {_user_output_width(target, fmt_run, length) for length in sorted(set(lengths))}
    return _artifact(target, fmt, widths.pop())


def _user_output_width(path: Path, fmt: str, sequence_length: int) -> int:
    """Run the user's model once on a dummy batch at `sequence_length` to learn its output width (and that it loads
    and takes that length at all: it is run at the shortest and the longest length it will be sent)."""
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
            f"model file {path} could not be run at sequence length {sequence_length}: {exc}",
            hint="The model must take input_ids and attention_mask (INT64 [batch, seq], seq dynamic) "
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
