"""TensorRT engines, the standard way: the ONNX export -> trt.OnnxParser -> one optimization profile -> a serialized
engine (`model.plan`), cached per model content, GPU name, TensorRT version, precision, max batch and sequence lengths
(the profile's shortest, median and longest: the payload's length histogram under the candidate's padding).

    EngineParameters(...)                       the build parameters (profile shapes, flags): pure, unit tested
    configure_builder(trt, builder, config, p)  applies them to a TensorRT builder config (the seam)
    trt_skip_reason(serving)                     why this run cannot build an engine (None: it can)
    engine_artifact(onnx, params, serving, ...)  the cached engine as a ModelArtifact (builds it on first use)
    build_on(gpu, onnx, params, target)          builds it in a child process given only that GPU

An engine is built on the first GPU of `serving` (the job hands over the candidate's GPUs: the one its slot pins it
to), never on whatever CUDA calls device 0 here: TensorRT builds on the current CUDA device, and the job's process
sees every GPU (another candidate may be measured on its device 0). The build runs in a child process given exactly
that GPU by UUID (hardware.cuda_environment: CUDA_VISIBLE_DEVICES=<uuid>, CUDA_DEVICE_ORDER=PCI_BUS_ID), where it
is CUDA device 0: the same way a server is given its GPUs, and CUDA reads that environment only when a process
starts it, so the child is the one place it is sure to apply.

Building needs an NVIDIA GPU, its driver and the `tensorrt` wheel (the `[tensorrt]` extra, TensorRT 10; 11 is refused
with TENSORRT_11's reason: its strongly typed networks have no fp16 builder flag). Nothing
here was run on a GPU when it was written (docs/gpu.md says what is verified).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import recommender
from recommender.errors import BuildError, CandidateSkipped
from recommender.hardware import Gpu, cuda_environment
from recommender.install import pip_install, requirement
from recommender.modelrepo.artifact import ModelArtifact
from recommender.modelrepo.model_source import file_sha256

TENSORRT_INSTALL = f"{pip_install('tensorrt>=10,<11')} (the [tensorrt] extra; it needs the NVIDIA driver)"
# why TensorRT 11 is refused (pyproject's pin says the same): the one-line reason a `trt` candidate is skipped with
TENSORRT_11 = (
    "TensorRT {version} is not supported: TensorRT 11 removed the builder's fp16/int8 flags in favour of strongly "
    "typed networks, so a trt-fp16 engine would need an fp16-converted ONNX (e.g. NVIDIA ModelOpt AutoCast) kept in "
    "the engine key, which recommender does not make; install " + TENSORRT_INSTALL
)
PRECISIONS = ("fp32", "fp16")
ENGINE_FILE = "model.plan"


@dataclass(frozen=True)
class EngineParameters:
    """What an engine is built for: its inputs at sequence lengths (shortest, median, longest) of the requests it
    is sent, batch 1..max_batch_size, precision."""

    input_names: tuple[str, ...]
    sequence_lengths: tuple[int, int, int]
    max_batch_size: int
    precision: str = "fp32"
    workspace_bytes: int = 1 << 30

    def __post_init__(self) -> None:
        if self.precision not in PRECISIONS:
            raise BuildError(f"TensorRT precision {self.precision!r} is not supported", hint=f"use one of {PRECISIONS}")
        shortest, median, longest = self.sequence_lengths
        if self.max_batch_size < 1 or not 1 <= shortest <= median <= longest:
            raise BuildError(
                f"engine shapes need max_batch_size >= 1 and sequence lengths 1 <= shortest <= median <= longest, "
                f"got {self.max_batch_size} and {list(self.sequence_lengths)}"
            )

    def profile_shapes(self) -> dict[str, tuple[tuple[int, int], tuple[int, int], tuple[int, int]]]:
        """(min, opt, max) per input: batch 1 to max_batch_size, optimised for max_batch_size (what the dynamic
        batcher forms under load); the sequence from the shortest request to the longest, optimised for the
        median."""
        (shortest, median, longest), top = self.sequence_lengths, self.max_batch_size
        return {name: ((1, shortest), (top, median), (top, longest)) for name in self.input_names}

    def network_flag_names(self, trt_major: int) -> tuple[str, ...]:
        """NetworkDefinitionCreationFlag names: EXPLICIT_BATCH before TensorRT 10 (explicit batch is the only mode
        from 10 on, and the flag is deprecated there)."""
        return ("EXPLICIT_BATCH",) if trt_major < 10 else ()

    def builder_flag_names(self, trt_major: int) -> tuple[str, ...]:
        """BuilderFlag names: FP16 for an fp16 engine (TensorRT 11, which removed it, is refused: trt_skip_reason)."""
        return ("FP16",) if self.precision == "fp16" else ()


def tensorrt_version() -> str | None:
    """`tensorrt.__version__` of the TensorRT this interpreter imports, None where it does not import. Read from the
    module, not from package metadata: pip installs TensorRT as `tensorrt`, `tensorrt-cu12` or `tensorrt-cu13`, so
    no one distribution name has its version."""
    try:
        import tensorrt
    except Exception:  # not installed, or its libraries do not load (no NVIDIA driver)
        return None
    return str(tensorrt.__version__)


def trt_major(version: str) -> int:
    """The major version of a TensorRT version string, e.g. 10 for '10.5.0.18'."""
    return int(version.split(".", 1)[0])


def configure_builder(trt: Any, builder: Any, config: Any, params: EngineParameters) -> Any:
    """Apply `params` to a TensorRT builder config: one optimization profile, the precision flags, the workspace
    limit. Returns the profile."""
    profile = builder.create_optimization_profile()
    for name, (low, opt, high) in params.profile_shapes().items():
        profile.set_shape(name, low, opt, high)
    config.add_optimization_profile(profile)
    for flag in params.builder_flag_names(trt_major(trt.__version__)):
        config.set_flag(getattr(trt.BuilderFlag, flag))
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, params.workspace_bytes)
    return profile


def network_flags(trt: Any, params: EngineParameters) -> int:
    """The create_network() flags bitmask for this TensorRT version."""
    bits = 0
    for name in params.network_flag_names(trt_major(trt.__version__)):
        bits |= 1 << int(getattr(trt.NetworkDefinitionCreationFlag, name))
    return bits


def engine_key(model_content: str, gpu_name: str, trt_version: str, params: EngineParameters) -> str:
    """The cache key of an engine: it is valid only for the same model bytes, GPU model, TensorRT version, precision,
    max batch and sequence lengths."""
    parts = (
        model_content,
        gpu_name,
        trt_version,
        params.precision,
        str(params.max_batch_size),
        ",".join(map(str, params.sequence_lengths)),
    )
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def build_engine(onnx_path: Path, params: EngineParameters, target: Path) -> None:
    """Parse the ONNX file and write the serialized engine to `target` (needs a GPU and the tensorrt wheel)."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(network_flags(trt, params))
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
        raise BuildError(f"TensorRT could not parse {onnx_path}: {errors}", hint="check the ONNX export (opset 17)")
    config = builder.create_builder_config()
    configure_builder(trt, builder, config, params)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise BuildError(f"TensorRT failed to build an engine from {onnx_path}", hint="the TensorRT log above says why")
    target.write_bytes(bytes(serialized))


def trt_skip_reason(serving: Any) -> str | None:
    """Why a `trt` candidate cannot be built for this run (`serving`: hardware.ServingHardware), or None."""
    if serving.accelerator != "gpu":
        detail = serving.hardware.gpu_status if serving.hardware else f"instance type {serving.declared}"
        return (
            f"TensorRT needs an NVIDIA GPU; this run serves on the CPU ({detail}). Run it on a GPU host "
            f"({pip_install(requirement('nvidia-ml-py'))}, the gpu extra) with target.accelerator: auto or gpu"
        )
    if serving.hardware is None:
        return (
            f"TensorRT engines are built on this host's GPU, but {serving.declared} is a remote instance; "
            "build and measure trt with the local or docker target on a host with the same GPU"
        )
    version = tensorrt_version()
    if version is None:
        return f"TensorRT is not installed on this GPU host: {TENSORRT_INSTALL}"
    if trt_major(version) >= 11:
        return TENSORRT_11.format(version=version)
    return None


def engine_artifact(onnx: ModelArtifact, params: EngineParameters, serving: Any, cache_dir: Path) -> ModelArtifact:
    """The engine for `onnx` (keyed by the sha256 of its bytes) on the first GPU of `serving` (the candidate's), from
    the cache or built now on that GPU; CandidateSkipped with the true reason where there is no GPU or no TensorRT."""
    reason = trt_skip_reason(serving)
    if reason is not None:
        raise CandidateSkipped(reason)
    gpu = serving.hardware.gpus[0]
    key = engine_key(file_sha256(onnx.path), gpu.name, str(tensorrt_version()), params)
    target = Path(cache_dir) / f"trt-{key}" / ENGINE_FILE
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = target.with_suffix(f".partial{os.getpid()}")
        build_on(gpu, onnx.path, params, staging)
        staging.rename(target)
    return ModelArtifact(target, "tensorrt", onnx.inputs, onnx.outputs, onnx.random_weights)


def build_on(gpu: Gpu, onnx_path: Path, params: EngineParameters, target: Path) -> None:
    """build_engine in a child process given only `gpu` (by UUID, as its CUDA device 0); BuildError with the child's
    output when it fails. The child imports this same recommender (its folder first on PYTHONPATH)."""
    package_root = str(Path(recommender.__file__).resolve().parents[1])
    environ = os.environ | cuda_environment((gpu,))
    environ["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    arguments = [str(onnx_path), str(target), json.dumps(asdict(params))]
    command = [sys.executable, "-m", __name__, *arguments]
    done = subprocess.run(command, env=environ, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip() or f"exit status {done.returncode}").splitlines()
        raise BuildError(
            f"TensorRT could not build an engine from {onnx_path} on GPU {gpu.index} ({gpu.uuid}): {said[-1]}",
            hint="\n".join(said[-30:]),
        )


def main(arguments: list[str]) -> int:
    """The child of build_on: `python -m recommender.modelrepo.tensorrt_engine ONNX TARGET PARAMETERS_JSON`."""
    onnx_path, target, parameters = arguments
    data = json.loads(parameters)
    params = EngineParameters(
        **(data | {"input_names": tuple(data["input_names"]), "sequence_lengths": tuple(data["sequence_lengths"])})
    )
    try:
        build_engine(Path(onnx_path), params, Path(target))
    except BuildError as error:
        print(error.message + (f" (hint: {error.hint})" if error.hint else ""), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
