"""The engine each optimization needs where its candidates serve, checked before any server starts: the job skips a
candidate whose engine is missing, with the one command that installs it; `recommender doctor` prints the same
checks with the engines' versions.

    engine_check(optimization, serving, native, where, image) -> Check   what is there, or what is missing and its fix
    engine_refusals(optimizations, serving, native, image)     -> {optimization: why, with the command}  (the job's
                                                                  preflight)
    placement_refusal(optimization, serving)                   -> why it cannot serve there at all, or None (the plan)

The local target serves with the Python-backend runner in this interpreter's environment (targets/triton_binary.py),
so every engine it uses is imported here, and on a GPU each CUDA build is compared with the driver (NVML's CUDA
driver version). The image targets (docker, sagemaker) serve Triton's native backends: only a TensorRT engine is
built on this host, with this host's TensorRT and GPU, and it loads only in an image labelled with the same TensorRT
version (`image`: the docker target's, targets/docker.py `image_versions`). The install commands name this
interpreter, so they install where the engines are looked for, whether or not its virtualenv is on PATH.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import shlex
import sys
from collections.abc import Callable, Iterable
from typing import Any

from recommender.doctor.check import Check
from recommender.hardware import CUDA_DRIVER_BRANCHES, Hardware, ServingHardware, cuda_mismatch
from recommender.install import pip_install, requirement
from recommender.modelrepo.model_source import installed_version
from recommender.targets.docker import TENSORRT_LABEL, ImageVersions

RUNNER_MODULES = {"pt": ("torch",), "onnx": ("onnxruntime",), "openvino": ("openvino",), "trt": ("tensorrt", "torch")}
BUILD_MODULES = {"trt": ("tensorrt",)}  # what the image targets need here: the engine is built on this host
CUDA_PROVIDER = "CUDAExecutionProvider"
# the PyTorch wheel index of a build each CUDA major version's drivers run (pytorch.org/get-started lists them)
TORCH_INDEX = {13: "cu130", 12: "cu126", 11: "cu118"}
DEFAULT_TORCH_INDEX = "cu130"


def engine_refusals(
    optimizations: Iterable[str], serving: ServingHardware, native: bool, image: ImageVersions | None = None
) -> dict[str, str]:
    """Why each optimization cannot serve on this placement, with the fix (absent: it can)."""
    checks = {o: engine_check(o, serving, native, "", image) for o in dict.fromkeys(optimizations)}
    return {o: f"{check.found}: {check.fix}" for o, check in checks.items() if not check.passed}


def placement_refusal(optimization: str, serving: ServingHardware) -> str | None:
    """Why `optimization` cannot serve where the target serves, whatever is installed (TensorRT on the CPU or on a
    remote machine), as engine_refusals words it; None where it may. Nothing is imported: `recommender plan`'s."""
    refusal = _trt_placement(serving) if optimization == "trt" else None
    return f"{refusal[0]}: {refusal[1]}" if refusal is not None else None


def engine_check(
    optimization: str, serving: ServingHardware, native: bool, where: str, image: ImageVersions | None = None
) -> Check:
    """The engine of `optimization` where it serves (`native`: the image's backends, `image` the one serving on this
    host; else the local runner)."""
    name = f"{optimization} engine" + (f" ({where})" if where else "")
    if optimization == "trt" and (refusal := _trt_placement(serving)) is not None:
        return Check(name, *refusal)
    modules = BUILD_MODULES.get(optimization, ()) if native else RUNNER_MODULES[optimization]
    if not modules:
        return Check(name, "served by the image's native backend: nothing needed on this host")
    found = []
    for module_name in modules:
        module, problem = _module(module_name)
        if module is None:
            return Check(name, problem, pip_install(requirement(module_name)))
        refusal = _on_gpu(module_name, module, serving) or _image_problem(module_name, module, image)
        if refusal is not None:
            return Check(name, *refusal)
        found.append(_describe(module_name, module))
    return Check(name, "; ".join(found))


def _trt_placement(serving: ServingHardware) -> tuple[str, str] | None:
    if serving.accelerator != "gpu":
        detail = serving.hardware.gpu_status if serving.hardware else f"instance type {serving.declared}"
        return (
            f"TensorRT needs an NVIDIA GPU; this run serves on the CPU ({detail})",
            "run on a GPU host (NVIDIA driver, `pip install nvidia-ml-py`) with target.accelerator: auto or gpu",
        )
    if serving.hardware is None:
        return (
            f"TensorRT engines are built on this host's GPU, not on the remote {serving.declared}",
            "measure trt with the local or docker target on a host with the same GPU",
        )
    return None


def _image_problem(name: str, module: Any, image: ImageVersions | None) -> tuple[str, str] | None:
    """Why the image cannot load what `module` builds here: a TensorRT engine loads only on the TensorRT version that
    built it."""
    if name != "tensorrt" or image is None:
        return None
    if image.tensorrt is None:
        return (
            f"image {image.image} does not label its TensorRT version ({TENSORRT_LABEL}), so an engine built with "
            f"TensorRT {module.__version__} here may not load in it",
            f"rebuild it from containers/triton, which labels its versions: docker build -t {image.image} "
            "containers/triton",
        )
    if _release(module.__version__) == _release(image.tensorrt):
        return None
    return (
        f"this host's TensorRT {module.__version__} builds engines that image {image.image}'s TensorRT "
        f"{image.tensorrt} cannot load",
        f"{pip_install(f'tensorrt=={_release(image.tensorrt)}')} (or serve from an image built on the NGC Triton "
        f"release with TensorRT {_release(module.__version__)})",
    )


def _release(version: str) -> str:
    """major.minor.patch of a TensorRT version (a plan names its release; the build number, 10.5.0.18, does not
    matter)."""
    return ".".join(version.split(".")[:3])


def _module(name: str) -> tuple[Any, str]:
    """The imported module, or None and why (not installed, or installed but failing to import)."""
    try:
        return importlib.import_module(name), ""
    except ModuleNotFoundError as error:
        if error.name == name:
            return None, f"{name} is not installed for {sys.executable}"
        return None, f"{name} does not import: {error}"
    except Exception as error:  # a missing shared library (OSError), a broken install
        return None, f"{name} does not import: {str(error).splitlines()[0] if str(error) else type(error).__name__}"


def _on_gpu(name: str, module: Any, serving: ServingHardware) -> tuple[str, str] | None:
    """What stops `module` from serving on this host's GPU (its CUDA build, its providers), with the fix; None on a
    CPU run."""
    check = GPU_CHECKS.get(name)
    if serving.accelerator != "gpu" or serving.hardware is None or check is None:
        return None
    return check(module, serving.hardware)


def _torch_on_gpu(torch: Any, hardware: Hardware) -> tuple[str, str] | None:
    build = getattr(torch.version, "cuda", None)
    component = f"torch {torch.__version__}"
    index = TORCH_INDEX.get(_major(hardware.cuda_version), DEFAULT_TORCH_INDEX)
    reinstall = pip_install(requirement("torch"), f"--index-url https://download.pytorch.org/whl/{index}")
    if build is None:
        return f"{component} is a CPU build: GPU instances need a CUDA build", reinstall
    mismatch = cuda_mismatch(component, build, hardware)
    if mismatch is None:
        return None
    return mismatch, f"upgrade the NVIDIA driver, or install a torch build this driver runs: {reinstall}"


def _tensorrt_on_gpu(tensorrt: Any, hardware: Hardware) -> tuple[str, str] | None:
    build = tensorrt_cuda()
    mismatch = cuda_mismatch(f"TensorRT {tensorrt.__version__}", build, hardware)
    if mismatch is None:
        return None
    variant = requirement("tensorrt").replace("tensorrt", f"tensorrt-cu{_major(hardware.cuda_version)}", 1)
    return mismatch, f"upgrade the NVIDIA driver, or install TensorRT for this driver's CUDA: {pip_install(variant)}"


def _onnxruntime_on_gpu(onnxruntime: Any, hardware: Hardware) -> tuple[str, str] | None:
    providers = onnxruntime.get_available_providers()
    if CUDA_PROVIDER in providers:
        return None
    python = shlex.quote(sys.executable)
    return (
        f"onnxruntime {onnxruntime.__version__} has no {CUDA_PROVIDER} (it has {', '.join(providers)}): "
        "it would serve on the CPU",
        f"{python} -m pip uninstall -y onnxruntime && {python} -m pip install onnxruntime-gpu",
    )


GPU_CHECKS: dict[str, Callable[[Any, Hardware], tuple[str, str] | None]] = {
    "torch": _torch_on_gpu,
    "tensorrt": _tensorrt_on_gpu,
    "onnxruntime": _onnxruntime_on_gpu,
}


def _describe(name: str, module: Any) -> str:
    version = str(getattr(module, "__version__", "") or installed_version(name) or "(version unknown)")
    if name == "torch":
        build = getattr(module.version, "cuda", None)
        return f"torch {version} ({f'CUDA {build} build' if build else 'CPU build'})"
    if name == "onnxruntime":
        return f"onnxruntime {version} ({', '.join(module.get_available_providers())})"
    if name == "tensorrt":
        build = tensorrt_cuda()
        return f"tensorrt {version}" + (f" (CUDA {build} build)" if build else "")
    return f"{name} {version}"


def tensorrt_cuda(version_of: Callable[[str], str | None] = installed_version) -> str | None:
    """The CUDA major version of the installed TensorRT wheels (`tensorrt-cu12`, `tensorrt-cu13`, their -libs), e.g.
    "13"; None when none is installed under such a name."""
    for major in sorted(CUDA_DRIVER_BRANCHES, reverse=True):
        if any(version_of(f"tensorrt-cu{major}{suffix}") for suffix in ("", "-libs")):
            return str(major)
    return None


def _major(version: str | None) -> int:
    return int(version.split(".", 1)[0]) if version else 0
