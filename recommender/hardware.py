"""The hardware a run serves on, measured, never assumed: CPU model, cores and number-format features, and GPUs
through NVML.

    detect_hardware()                          -> Hardware   # this host (local and docker targets serve here)
    resolve_accelerator("auto"|"cpu"|"gpu", hw) -> "cpu" | "gpu"   # HardwareMissing (exit 2) for gpu without one
    gpu_instance_groups(count, gpu_indices)    -> [(count, [gpu]), ...]   # instances spread over a host's GPUs
    cuda_mismatch("torch 2.13.0", "13.0", hw)  -> why that CUDA build cannot run on this driver, or None
    usable_hardware(target, hw)                -> Hardware   # only the GPUs a local/docker target's servers may use
    cuda_environment(gpus)                     -> {CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES}   # a server's GPUs by UUID

NVML comes from `nvidia-ml-py` (the `[gpu]` extra, imported as `pynvml`). Without the package, without a driver or
without a device, the host has no GPU and `gpu_status` says which of the three it was.

NVML indices are not CUDA ordinals: NVML numbers GPUs in PCI bus order and ignores CUDA_VISIBLE_DEVICES; CUDA numbers
them fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, within what CUDA_VISIBLE_DEVICES lists, in its order. So a
GPU is named by its NVML UUID across the two: a server is given its GPUs as CUDA_VISIBLE_DEVICES=UUID,... (with
CUDA_DEVICE_ORDER=PCI_BUS_ID), and sees them as CUDA devices 0..n-1 in that order.
"""

from __future__ import annotations

import contextlib
import csv
import os
import platform
from collections.abc import Mapping
from dataclasses import KW_ONLY, asdict, dataclass, field, replace
from typing import Any

from recommender.errors import TargetError
from recommender.install import pip_install, requirement

ACCELERATORS = ("auto", "cpu", "gpu")
GPU_INSTALL = f"{pip_install(requirement('nvidia-ml-py'))} (the gpu extra); it needs the NVIDIA driver"


class HardwareMissing(TargetError):
    """The experiment asks for hardware this host does not have (target.accelerator: gpu on a CPU-only host), or
    names a GPU ambiguously (by index, where CUDA and NVML count differently)."""

    exit_code = 2


@dataclass(frozen=True)
class GpuStatus:
    """What a run's GPU sampler found, stored as its text in `server_stats["gpu"]`: `2 GPU(s)` (with what NVML did not
    give, `2 GPU(s); MIG: utilisation unsupported`), `no GPU (why)`, or `not sampled` (no GPU count and no reason)."""

    gpus: int = 0
    why_none: str | None = None
    notes: tuple[str, ...] = ()  # figures NVML did not give for these GPUs

    @property
    def text(self) -> str:
        if self.gpus:
            return "; ".join((f"{self.gpus} GPU(s)", *self.notes))
        return f"no GPU ({self.why_none})" if self.why_none is not None else "not sampled"

    @classmethod
    def parse(cls, text: str) -> GpuStatus:
        """The status from its stored text (the one place that reads the text back)."""
        head, *notes = text.split("; ")
        count, found, _ = head.partition(" GPU(s)")
        if found and count.isdigit():
            return cls(int(count), notes=tuple(notes))
        if text.startswith("no GPU"):
            return cls(why_none=text.removeprefix("no GPU").strip().removeprefix("(").removesuffix(")"))
        return cls()


@dataclass(frozen=True)
class Gpu:
    index: int  # NVML's (PCI bus order), not a CUDA ordinal
    name: str
    memory_mb: float
    _: KW_ONLY
    mig: bool | None = None  # MIG mode on; None where NVML cannot tell (a GPU without MIG)
    uuid: str = ""  # NVML's GPU-...; "" in runs stored before it was recorded


@dataclass(frozen=True)
class Hardware:
    """What a host has: its CPU, its GPUs (empty when none) and why there are none."""

    cpu_model: str
    cpu_cores: int
    gpus: tuple[Gpu, ...] = ()
    driver_version: str | None = None
    cuda_version: str | None = None
    gpu_status: str = "no GPU"  # "2 GPU(s)" or the plain reason there is none
    # the CPU's flags that say which number formats it computes natively (NUMBER_FEATURES; empty: not recorded, as in
    # runs stored before it was, or a host without /proc/cpuinfo)
    cpu_features: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["gpus"] = [asdict(gpu) for gpu in self.gpus]
        data["cpu_features"] = list(self.cpu_features)  # as JSON stores it
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> Hardware | None:
        if not data:
            return None
        fields: dict[str, Any] = {
            key: data.get(key) for key in ("cpu_model", "cpu_cores", "driver_version", "cuda_version")
        }
        gpus = tuple(Gpu(**gpu) for gpu in data.get("gpus") or ())
        features = tuple(data.get("cpu_features") or ())
        return cls(**fields, gpus=gpus, gpu_status=data.get("gpu_status") or "no GPU", cpu_features=features)

    def describe(self) -> str:
        """One line, e.g. `Intel Xeon, 2 cores; no GPU (pynvml not installed)` or `...; 1 x NVIDIA A10G (23028 MiB)`."""
        cpu = f"{self.cpu_model}, {self.cpu_cores} cores"
        if not self.gpus:
            return f"{cpu}; {self.gpu_status}"
        names = sorted({gpu.name for gpu in self.gpus})
        memory = max(gpu.memory_mb for gpu in self.gpus)
        return (
            f"{cpu}; {len(self.gpus)} x {', '.join(names)} ({memory:.0f} MiB), driver {self.driver_version}, "
            f"CUDA {self.cuda_version}"
        )


@dataclass(frozen=True)
class ServingHardware:
    """Where one run serves: the resolved accelerator, the hardware and the backend that served it."""

    accelerator: str  # cpu | gpu (resolved, never auto)
    hardware: (
        Hardware | None
    )  # None where the hardware is not this host's (sagemaker, remote): declared by instance_type
    declared: str | None = None  # the instance type label for a target whose hardware is not detected here
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, backend: str | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"accelerator": self.accelerator, "declared": self.declared}
        data |= self.hardware.to_dict() if self.hardware else {"detected": False}
        return data | ({"backend": backend} if backend else {})


def describe_served(hardware: dict[str, Any] | None, backend: str | None) -> str | None:
    """What a stored run served on, in words: `cpu (Intel Xeon, 2 cores; no GPU (...)), backend python:onnxruntime`;
    None for a run stored before hardware was recorded."""
    if not hardware:
        return None
    found = Hardware.from_dict(hardware) if hardware.get("cpu_model") else None
    where = found.describe() if found else f"declared by instance type {hardware.get('declared')}, not detected"
    return f"{hardware.get('accelerator')} ({where})" + (f", backend {backend}" if backend else "")


GPU_FIGURES = (
    ("gpu_utilization_percent", "{:.0f} % utilisation"),
    ("gpu_memory_mb", "{:,.0f} MiB used"),
    ("gpu_power_w", "{:.0f} W"),
)


def describe_gpu(server_stats: dict[str, Any] | None) -> str | None:
    """The GPU figures of a stored run at MaxInvocations (NVML, means over the level's windows), e.g. `63 % utilisation,
    1,234 MiB used, 71 W`, with what NVML did not give (`1,234 MiB used (MIG: utilisation unsupported)`); the plain
    reason where the run had no GPU (`no GPU (nvidia-ml-py not installed)`); None for a run stored without GPU
    sampling."""
    stats = server_stats or {}
    at = stats.get("at_max_invocations") or {}
    shown = [form.format(at[name]) for name, form in GPU_FIGURES if at.get(name) is not None]
    status = stats.get("gpu")
    sampled = GpuStatus.parse(str(status)) if status is not None else GpuStatus()
    if shown:
        return ", ".join(shown) + (f" ({'; '.join(sampled.notes)})" if sampled.notes else "")
    if status is None:
        return None
    return sampled.text if sampled.why_none is not None else f"{sampled.text}, no GPU figures at MaxInvocations"


def detect_hardware(nvml: Any = None) -> Hardware:
    """This host's hardware; `nvml` is the pynvml module (imported here when not given: a fake in tests)."""
    return replace(_with_gpus(nvml, cpu_model_name(), available_cores()), cpu_features=cpu_features())


def _with_gpus(nvml: Any, cpu_model: str, cores: int) -> Hardware:
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return Hardware(cpu_model, cores, gpu_status=f"no GPU (nvidia-ml-py not installed: {GPU_INSTALL})")
        nvml = pynvml
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError: no driver or no device
        return Hardware(cpu_model, cores, gpu_status=f"no GPU (NVML: {_text(exc)})")
    try:
        gpus = tuple(_gpu(nvml, index) for index in range(nvml.nvmlDeviceGetCount()))
        driver = _text(nvml.nvmlSystemGetDriverVersion())
        cuda = _cuda_version(nvml.nvmlSystemGetCudaDriverVersion())
    except Exception as exc:  # NVMLError after init: NoPermission, GpuIsLost, Unknown
        return Hardware(cpu_model, cores, gpu_status=f"no GPU (NVML: {_text(exc) or type(exc).__name__})")
    finally:
        with contextlib.suppress(Exception):  # a lost GPU may fail the shutdown too
            nvml.nvmlShutdown()
    status = f"{len(gpus)} GPU(s)" if gpus else "no GPU (NVML found no device)"
    return Hardware(cpu_model, cores, gpus, driver if gpus else None, cuda if gpus else None, status)


def resolve_accelerator(requested: str, hardware: Hardware) -> str:
    """auto -> gpu when the host has one, else cpu; gpu without one is refused (HardwareMissing, exit 2)."""
    if requested not in ACCELERATORS:
        raise TargetError(f"unknown accelerator {requested!r}", hint=f"use one of {', '.join(ACCELERATORS)}")
    if requested == "gpu" and not hardware.gpus:
        raise HardwareMissing(
            f"target.accelerator is gpu but this host has {hardware.gpu_status}",
            hint="Run on a host with an NVIDIA GPU and driver "
            f"(and `{pip_install(requirement('nvidia-ml-py'))}`, the gpu extra), or set "
            "target.accelerator: auto (measures the CPU here) or cpu.",
        )
    if requested == "auto":
        return "gpu" if hardware.gpus else "cpu"
    return requested


def gpu_instance_groups(count: int, gpu_indices: list[int] | tuple[int, ...]) -> list[tuple[int, list[int]]]:
    """`count` model instances spread round-robin over the GPUs: [(instances, [gpu index]), ...], one group per GPU
    used. Triton creates a group's `count` on each GPU it lists, so each group lists one GPU."""
    if count < 1:
        raise ValueError(f"instance count must be at least 1, got {count}")
    if not gpu_indices:
        raise ValueError("no GPU to place instances on")
    per_gpu = [count // len(gpu_indices) + (1 if i < count % len(gpu_indices) else 0) for i in range(len(gpu_indices))]
    return [(n, [gpu]) for n, gpu in zip(per_gpu, gpu_indices, strict=False) if n]


# the oldest Linux driver branch that runs each CUDA major version (a driver runs every build of its CUDA major
# version and older ones: minor-version compatibility)
CUDA_DRIVER_BRANCHES = {11: "R450", 12: "R525", 13: "R580"}


def cuda_mismatch(component: str, build: str | None, hardware: Hardware) -> str | None:
    """Why `component`, built for CUDA `build` (e.g. torch.version.cuda, "13.0"), cannot run on this host's driver
    (NVML's CUDA driver version); None when it can, when it is no CUDA build, or when the host has no GPU."""
    if build is None or hardware.cuda_version is None:
        return None
    needed, supported = _major(build), _major(hardware.cuda_version)
    if needed <= supported:
        return None
    branch = CUDA_DRIVER_BRANCHES.get(needed, f"one for CUDA {needed}")
    return (
        f"{component} is a CUDA {build} build, which needs NVIDIA driver {branch} or newer; this host's driver "
        f"{hardware.driver_version} supports CUDA {hardware.cuda_version} at most"
    )


def _major(version: str) -> int:
    return int(version.split(".", 1)[0])


DETECTED_KINDS = ("local", "docker")  # targets serving on this host: their hardware is detected here
# engines that start their own server on this host: its CPU (and GPUs) are recorded with each run, so that a report
# can judge threads against cores (decide/thread_cliff.py) and a key tells two hosts apart; their accelerator stays
# the instance type's (the engine picks its own device: vLLM's build, llama.cpp's backend)
HOST_SERVED_KINDS = ("infinity", "vllm", "llamacpp")
GPU_FAMILIES = ("ml.g", "ml.p")  # SageMaker instance families with NVIDIA GPUs


def serving_hardware(target: Any, hardware: Hardware | None = None) -> ServingHardware:
    """The accelerator a target's runs use and the hardware they run on (`target` is the spec's target section).

    local/docker: this host, detected, with only the GPUs the target may use (usable_hardware). sagemaker/remote:
    declared by instance_type (ml.g*/ml.p* are GPU types); infinity/vllm/llamacpp: declared so, with this host's
    hardware recorded beside (HOST_SERVED_KINDS)."""
    if target.kind in DETECTED_KINDS:
        hardware = usable_hardware(target, hardware or detect_hardware())
        return ServingHardware(resolve_accelerator(target.accelerator, hardware), hardware)
    has_gpu = target.instance_type.startswith(GPU_FAMILIES)
    if target.accelerator == "gpu" and not has_gpu:
        raise HardwareMissing(
            f"target.accelerator is gpu but instance_type {target.instance_type} has no GPU",
            hint="Choose a GPU instance type (ml.g5.xlarge, ml.g4dn.xlarge) or set target.accelerator: auto.",
        )
    accelerator = "cpu" if target.accelerator == "cpu" or not has_gpu else "gpu"
    host = (hardware or detect_hardware()) if target.kind in HOST_SERVED_KINDS else None
    return ServingHardware(accelerator, host, declared=target.instance_type)


def usable_hardware(target: Any, hardware: Hardware, environ: Mapping[str, str] | None = None) -> Hardware:
    """The host's hardware as a local or docker target's servers may use it (`target` is the spec's target section):
    docker, the GPUs its `gpus` option gives a container (none for null: CPU only); local, the GPUs
    CUDA_VISIBLE_DEVICES leaves visible (NVML lists every GPU whatever it says). HardwareMissing (exit 2) when
    target.accelerator is gpu and the host's GPUs are all left out."""
    if not hardware.gpus:
        return hardware
    if target.kind == "docker":
        usable = docker_gpus(target.gpus, hardware.gpus)
        why, fix = "target.gpus is null (CPU only): the container gets no GPU", "set target.gpus: all (or device=N)"
    else:
        environ = os.environ if environ is None else environ
        usable = visible_gpus(hardware.gpus, environ)
        why = f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')!r} hides every GPU of this host"
        fix = "unset CUDA_VISIBLE_DEVICES or list a GPU in it (nvidia-smi -L names them)"
    if usable == hardware.gpus:
        return hardware
    if not usable and target.accelerator == "gpu":
        raise HardwareMissing(
            f"target.accelerator is gpu but {why}; nothing was measured",
            hint=f"{fix}, or set target.accelerator: auto (measures the CPU) or cpu.",
        )
    status = f"{len(usable)} GPU(s)" if usable else f"no GPU ({why})"
    return replace(hardware, gpus=usable, gpu_status=status)


def visible_gpus(gpus: tuple[Gpu, ...], environ: Mapping[str, str]) -> tuple[Gpu, ...]:
    """The GPUs CUDA_VISIBLE_DEVICES leaves to CUDA, in CUDA's order (all, in PCI order, when it is unset). Its entries
    are NVML UUIDs (or their unique prefixes) or indices; CUDA stops at the first entry naming no device. Indices
    are read in PCI bus order, as CUDA does with CUDA_DEVICE_ORDER=PCI_BUS_ID; under CUDA's default fastest-first
    order they are ambiguous on a host with GPUs of different models: HardwareMissing (exit 2) then."""
    listed = environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return gpus
    entries = [entry.strip() for entry in listed.split(",")] if listed.strip() else []
    by_index = any(entry.isdigit() for entry in entries)
    if by_index and environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID" and len({gpu.name for gpu in gpus}) > 1:
        raise HardwareMissing(
            f"CUDA_VISIBLE_DEVICES={listed!r} names GPUs by index, which CUDA counts fastest-first on this host of "
            f"{', '.join(sorted({gpu.name for gpu in gpus}))}, and NVML by PCI bus: which GPU is meant is ambiguous",
            hint="list UUIDs instead (nvidia-smi -L), or set CUDA_DEVICE_ORDER=PCI_BUS_ID",
        )
    found: list[Gpu] = []
    for entry in entries:
        gpu = _named_gpu(entry, gpus)
        if gpu is None:
            break
        if gpu not in found:
            found.append(gpu)
    return tuple(found)


def docker_gpus(option: str | None, gpus: tuple[Gpu, ...]) -> tuple[Gpu, ...]:
    """The host GPUs `docker run --gpus OPTION` gives a container, in PCI order (the order the container sees them
    with CUDA_DEVICE_ORDER=PCI_BUS_ID), read as the docker CLI reads it: none for None, every one for `all`, the
    first N for a count, the listed ones for `"device=1,2"` (NVML indices, as the NVIDIA runtime reads them, or
    UUIDs), the first one when neither is given. HardwareMissing (exit 2) for a device or count this host lacks."""
    if option is None:
        return ()
    wanted: list[Gpu] | None = None
    for field_text in next(csv.reader([option.strip()])):
        key, has_value, value = field_text.strip().partition("=")
        key, value = (key, value) if has_value else ("count", key)
        if key == "count" or (key, value) == ("device", "all"):  # `all`, `count=all`, `device=all`: every GPU
            wanted = [*(wanted or ()), *(gpus if value == "all" else gpus[: _count(value, option, gpus)])]
        elif key == "device":
            wanted = [*(wanted or ()), *(_docker_device(entry.strip(), option, gpus) for entry in value.split(","))]
    return tuple(sorted(set(gpus[:1] if wanted is None else wanted), key=lambda gpu: gpu.index))


def cuda_environment(gpus: tuple[Gpu, ...]) -> dict[str, str]:
    """The environment that gives a server exactly `gpus`, as CUDA devices 0..n-1 in this order (none: CPU only)."""
    return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": ",".join(gpu.uuid for gpu in gpus)}


def _named_gpu(entry: str, gpus: tuple[Gpu, ...]) -> Gpu | None:
    """The GPU an index or a UUID (prefix) names, as CUDA reads CUDA_VISIBLE_DEVICES; None when it names none."""
    if entry.isdigit():
        return next((gpu for gpu in gpus if gpu.index == int(entry)), None)
    named = [gpu for gpu in gpus if entry and gpu.uuid.startswith(entry)]
    return named[0] if len(named) == 1 else None


def _docker_device(entry: str, option: str, gpus: tuple[Gpu, ...]) -> Gpu:
    gpu = _named_gpu(entry, gpus)
    if gpu is None:
        raise HardwareMissing(
            f"target.gpus {option!r} names GPU {entry!r}, which this host does not have "
            f"(NVML lists {', '.join(f'{g.index} {g.uuid}' for g in gpus)})",
            hint="name a GPU by its index or UUID (nvidia-smi -L), or set target.gpus: all",
        )
    return gpu


def _count(value: str, option: str, gpus: tuple[Gpu, ...]) -> int:
    if not value.isdigit() or not 0 < int(value) <= len(gpus):
        raise HardwareMissing(
            f"target.gpus {option!r} asks for {value} GPU(s) and this host has {len(gpus)}",
            hint=f"ask for 1 to {len(gpus)}, or set target.gpus: all",
        )
    return int(value)


def cpu_model_name() -> str:
    """The CPU model from /proc/cpuinfo (Linux), else platform.processor()."""
    return _cpuinfo_value(("model name",)) or platform.processor() or platform.machine() or "unknown CPU"


def _cpuinfo_value(names: tuple[str, ...], cpuinfo: str = "/proc/cpuinfo") -> str | None:
    """The value of the first /proc/cpuinfo line named one of `names` (the first processor's); None without one."""
    try:
        with open(cpuinfo, encoding="utf-8") as handle:
            for line in handle:
                name, _, value = line.partition(":")
                if name.strip() in names:
                    return value.strip()
    except OSError:
        pass
    return None


# the CPU flags recorded with a run (/proc/cpuinfo's `flags` on x86, `Features` on Arm): the vector and matrix
# extensions that decide which number formats the CPU computes natively (decide/cpu_precision.py reads them)
NUMBER_FEATURES = (
    "avx2", "fma", "f16c", "avx512f", "avx512_vnni", "avx_vnni", "avx512_bf16", "avx512_fp16",
    "amx_tile", "amx_bf16", "amx_int8", "amx_fp16",
    "asimd", "asimdhp", "fphp", "asimddp", "bf16", "i8mm", "sve", "sve2",
)  # fmt: skip


def cpu_features(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """This CPU's NUMBER_FEATURES, in that order, from the first `flags` (x86) or `Features` (Arm) line of
    /proc/cpuinfo; () where there is none (another OS: nothing is recorded, nothing is judged)."""
    present = set((_cpuinfo_value(("flags", "Features"), cpuinfo) or "").split())
    return tuple(feature for feature in NUMBER_FEATURES if feature in present)


def available_cores() -> int:
    """CPU cores this process may run on (the affinity mask where the OS has one, else os.cpu_count())."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _gpu(nvml: Any, index: int) -> Gpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    memory = nvml.nvmlDeviceGetMemoryInfo(handle).total / 2**20
    return Gpu(
        index,
        _text(nvml.nvmlDeviceGetName(handle)),
        round(memory, 1),
        mig=_mig_mode(nvml, handle),
        uuid=_text(nvml.nvmlDeviceGetUUID(handle)),
    )


def _mig_mode(nvml: Any, handle: Any) -> bool | None:
    """MIG on (current mode), or None where the GPU has no MIG (NVML raises NotSupported) or NVML is too old."""
    try:
        current, _pending = nvml.nvmlDeviceGetMigMode(handle)
    except Exception:
        return None
    return bool(current)


def _cuda_version(value: int) -> str:
    """NVML's CUDA driver version integer (12040) as text (12.4)."""
    return f"{value // 1000}.{value % 1000 // 10}"


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
