"""A fake NVML: an object with the pynvml functions the GPU code calls, for the process boundary (there is no NVIDIA
driver on the test hosts). Each GPU is a FakeGpu, which is also its handle; a MIG GPU refuses utilisation with
NotSupported, as NVML does, and `queried` lists the UUIDs each figure query was asked about. `fail` is raised by
nvmlInit (no driver), `fail_after_init` by the first query after it (as NoPermission or GpuIsLost are)."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace


class NVMLError(Exception):
    """pynvml.NVMLError's stand-in."""


class NVMLError_NotSupported(NVMLError):  # pynvml's name
    """pynvml.NVMLError_NotSupported's stand-in."""


@dataclass
class FakeGpu:
    name: str
    uuid: str
    utilisation: float = 0.0  # percent
    memory_used: int = 0  # bytes
    power_mw: int = 100_000
    mig: bool | None = False  # MIG mode on: utilisation is NotSupported; None: a GPU without MIG (the query fails)
    memory_total: int = 80 * 2**30  # bytes


class FakeNvml:
    NVMLError = NVMLError
    NVMLError_NotSupported = NVMLError_NotSupported

    def __init__(
        self,
        gpus: list[FakeGpu] | list[str],
        fail: Exception | None = None,
        fail_after_init: Exception | None = None,
        mig: bool | None = None,
    ) -> None:
        """`gpus` as FakeGpus, or as names (24 GiB each, UUID from the index, MIG mode `mig`)."""
        self.gpus = [
            gpu if isinstance(gpu, FakeGpu) else FakeGpu(gpu, f"GPU-{i:08x}-fake", mig=mig, memory_total=24 * 2**30)
            for i, gpu in enumerate(gpus)
        ]
        self.fail, self.fail_after_init, self.shut = fail, fail_after_init, False
        self.queried: list[str] = []

    def nvmlInit(self) -> None:
        if self.fail:
            raise self.fail

    def nvmlShutdown(self) -> None:
        self.shut = True

    def nvmlDeviceGetCount(self) -> int:
        if self.fail_after_init:
            raise self.fail_after_init
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpus[index]

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> FakeGpu:
        found = [gpu for gpu in self.gpus if gpu.uuid == uuid]
        if not found:
            raise NVMLError("Not Found")
        return found[0]

    def nvmlDeviceGetName(self, gpu: FakeGpu) -> str:
        return gpu.name

    def nvmlDeviceGetUUID(self, gpu: FakeGpu) -> str:
        return gpu.uuid

    def nvmlDeviceGetMemoryInfo(self, gpu: FakeGpu) -> SimpleNamespace:
        self.queried.append(gpu.uuid)
        return SimpleNamespace(total=gpu.memory_total, used=gpu.memory_used)

    def nvmlDeviceGetUtilizationRates(self, gpu: FakeGpu) -> SimpleNamespace:
        self.queried.append(gpu.uuid)
        if gpu.mig:
            raise NVMLError_NotSupported("Not Supported")
        return SimpleNamespace(gpu=gpu.utilisation, memory=0)

    def nvmlDeviceGetPowerUsage(self, gpu: FakeGpu) -> int:
        self.queried.append(gpu.uuid)
        return gpu.power_mw

    def nvmlDeviceGetMigMode(self, gpu: FakeGpu) -> list[int]:
        if gpu.mig is None:
            raise NVMLError_NotSupported("Not Supported")
        return [int(gpu.mig), int(gpu.mig)]

    def nvmlSystemGetDriverVersion(self) -> str:
        return "550.54.15"

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        return 12040
