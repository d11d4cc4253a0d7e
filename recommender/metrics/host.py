"""Server-side sampling during a load run, from the parent process, in a background thread (one sample a second).

Every second: CPU % and RSS of the whole server process tree (tritonserver and every Python backend stub, via
psutil over `deployment.server_pids()`), Triton's statistics snapshot (`deployment.statistics()`), and the
utilisation, memory used and power of the deployment's own GPUs (`deployment.gpu_uuids`, by NVML UUID: candidates
measured side by side on other GPUs are not counted) through NVML (nvidia-ml-py, the `[gpu]` extra); otherwise the run
records "no GPU" and why (`gpu_status`). Each NVML query is guarded: a figure NVML does not give (utilisation on a MIG
GPU, power on some boards) is left out and said in `gpu_status` ("1 GPU(s); MIG: utilisation unsupported"), and the
other figures go on being sampled.
`window_figures` turns the samples into per-window figures aligned with the load's clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from statistics import fmean
from typing import Any, Protocol

import psutil

from recommender.hardware import GpuStatus
from recommender.metrics.triton_stats import stats_delta


class Sampled(Protocol):
    gpu_uuids: tuple[str, ...]  # the GPUs its model runs on, by NVML UUID; () where none of this host's does

    def statistics(self) -> dict[str, Any]: ...

    def server_pids(self) -> list[int]: ...


@dataclass(frozen=True)
class Sample:
    at: float  # wall clock, epoch seconds
    cpu_percent: float | None  # whole server tree, % of one core
    rss_bytes: int | None
    processes: int
    statistics: dict[str, Any] | None
    gpu: dict[str, float] | None  # utilisation % (mean), memory used bytes, power W (sums) of the deployment's GPUs


class ProcessTree:
    """CPU % (since the previous call) and RSS summed over a changing set of pids; a new pid counts from its 2nd
    sample."""

    def __init__(self) -> None:
        self.known: dict[int, psutil.Process] = {}

    def measure(self, pids: list[int]) -> tuple[float | None, int | None, int]:
        if not pids:
            return None, None, 0
        cpu, rss, alive = 0.0, 0, 0
        for pid in pids:
            process = self.known.get(pid)
            try:
                if process is None:
                    process = self.known[pid] = psutil.Process(pid)
                    process.cpu_percent(None)  # prime
                    rss += process.memory_info().rss
                else:
                    cpu += process.cpu_percent(None)
                    rss += process.memory_info().rss
                alive += 1
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                self.known.pop(pid, None)
        return cpu, rss, alive


NO_GPU_HERE = "no GPU of this host serves the model"
# figure -> (its key in a sample, its NVML query on one GPU, how the deployment's GPUs add up)
GPU_QUERIES: dict[str, tuple[str, Callable[[Any, Any], float], Callable[[list[float]], float]]] = {
    "utilisation": ("utilization_percent", lambda nvml, h: nvml.nvmlDeviceGetUtilizationRates(h).gpu, fmean),
    "memory": ("memory_used_bytes", lambda nvml, h: nvml.nvmlDeviceGetMemoryInfo(h).used, sum),
    "power": ("power_w", lambda nvml, h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0, sum),  # milliwatts
}


@dataclass
class GpuReader:
    """Reads the deployment's GPUs through NVML, one guarded query per figure and GPU: a figure any of its GPUs does
    not give is left out of the sample and noted (NotSupported once: not asked again)."""

    nvml: Any  # the pynvml module (a fake in tests)
    handles: list[Any]
    notes: set[str] = field(default_factory=set)
    _unsupported: set[str] = field(default_factory=set)

    def read(self) -> dict[str, float]:
        figures = {}
        for name, (key, query, combine) in GPU_QUERIES.items():
            values = None if name in self._unsupported else self._query(name, query)
            if values:
                figures[key] = float(combine(values))
        return figures

    def _query(self, name: str, query: Callable[[Any, Any], float]) -> list[float] | None:
        """The figure of every GPU, or None (noted) when one of them does not give it."""
        values = []
        for handle in self.handles:
            try:
                values.append(query(self.nvml, handle))
            except self.nvml.NVMLError_NotSupported:
                self._unsupported.add(name)
                self.notes.add(f"MIG: {name} unsupported" if _mig(self.nvml, handle) else f"{name} unsupported")
                return None
            except Exception as exc:  # NVMLError (a lost GPU, a timeout): this sample goes without the figure
                self.notes.add(f"{name} unreadable ({str(exc).replace(';', ',')})")
                return None
        return values

    def status(self) -> GpuStatus:
        return GpuStatus(len(self.handles), notes=tuple(sorted(self.notes)))


def gpu_probe(uuids: tuple[str, ...] = (), nvml: Any = None) -> tuple[GpuReader | None, GpuStatus]:
    """A reader of the GPUs named by `uuids` (NVML UUIDs), or None with the reason there is none; `nvml` is the
    pynvml module (imported here when not given: a fake in tests)."""
    if nvml is None:
        try:
            import pynvml
        except ImportError:
            return None, GpuStatus(why_none="nvidia-ml-py not installed")
        nvml = pynvml
    if not uuids:
        return None, GpuStatus(why_none=NO_GPU_HERE)
    try:
        nvml.nvmlInit()
        handles = [nvml.nvmlDeviceGetHandleByUUID(uuid) for uuid in uuids]
    except Exception as exc:  # NVMLError without a GPU or driver, or a GPU gone since the run started
        return None, GpuStatus(why_none=str(exc))
    return GpuReader(nvml, handles), GpuStatus(len(handles))


def _mig(nvml: Any, handle: Any) -> bool:
    """MIG mode is on (False where NVML cannot tell)."""
    with contextlib.suppress(Exception):
        return bool(nvml.nvmlDeviceGetMigMode(handle)[0])
    return False


@dataclass
class ServerSampler:
    """Samples a deployment once a second in a daemon thread while used as a context manager."""

    deployment: Sampled
    interval_s: float = 1.0
    nvml: Any = None  # the pynvml module (imported when None: a fake in tests)
    samples: list[Sample] = field(default_factory=list)
    _gpu: GpuReader | None = None
    _gpu_status: GpuStatus = field(default_factory=GpuStatus)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    @property
    def gpu_status(self) -> str:
        """`1 GPU(s)` (with what NVML did not give: `; MIG: utilisation unsupported`), or `no GPU (why)`."""
        return (self._gpu.status() if self._gpu else self._gpu_status).text

    def __enter__(self) -> ServerSampler:
        self._gpu, self._gpu_status = gpu_probe(self.deployment.gpu_uuids, self.nvml)
        self._tree = ProcessTree()
        self._thread = threading.Thread(target=self._run, name="server-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._gpu is not None:
            with contextlib.suppress(Exception):
                self._gpu.nvml.nvmlShutdown()

    def _run(self) -> None:
        while True:
            self.samples.append(self.sample())
            if self._stop.wait(self.interval_s):
                self.samples.append(self.sample())
                return

    def sample(self) -> Sample:
        at = time.time()
        cpu, rss, count = self._tree.measure(self.deployment.server_pids())
        try:
            statistics = self.deployment.statistics()
        except Exception:  # the server may be busy or gone; a missing snapshot only widens a window's delta
            statistics = None
        gpu = self._gpu.read() if self._gpu else None
        return Sample(at, cpu, rss, count, statistics, gpu)


def window_figures(samples: list[Sample], started_at: float, start_s: float, end_s: float) -> dict[str, Any]:
    """Server figures of one window [start_s, end_s) of a load that started at `started_at` (epoch s)."""
    inside = [s for s in samples if start_s <= s.at - started_at < end_s]
    figures: dict[str, Any] = {
        "server_cpu_percent": _mean([s.cpu_percent for s in inside if s.cpu_percent is not None]),
        "server_rss_mb": _max([s.rss_bytes / 2**20 for s in inside if s.rss_bytes is not None]),
        "server_processes": _max([s.processes for s in inside]),
        "gpu_utilization_percent": _mean(_gpu_figure(inside, "utilization_percent")),
        "gpu_memory_mb": _max([used / 2**20 for used in _gpu_figure(inside, "memory_used_bytes")]),
        "gpu_power_w": _mean(_gpu_figure(inside, "power_w")),
    }
    return figures | _triton_delta(samples, started_at + start_s, started_at + end_s)


def _triton_delta(samples: list[Sample], start: float, end: float) -> dict[str, Any]:
    """Statistics delta between the last snapshot at or before `start` (+0.5 s) and the first at or after `end` (-0.5
    s)."""
    with_stats = [(s.at, s.statistics) for s in samples if s.statistics is not None]
    before = [(at, stats) for at, stats in with_stats if at <= start + 0.5]
    after = [(at, stats) for at, stats in with_stats if at >= end - 0.5]
    if not before or not after or after[0][0] <= before[-1][0]:
        return {}
    delta = stats_delta(before[-1][1], after[0][1])
    return {
        "queue_us": delta.avg_us["queue"],
        "compute_input_us": delta.avg_us["compute_input"],
        "compute_infer_us": delta.avg_us["compute_infer"],
        "compute_output_us": delta.avg_us["compute_output"],
        "executions": delta.execution_count,
        "inferences": delta.inference_count,
        "avg_batch_size": delta.avg_batch_size,
    }


def _gpu_figure(samples: list[Sample], name: str) -> list[float]:
    return [s.gpu[name] for s in samples if s.gpu and name in s.gpu]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _max(values: list[float]) -> float | None:
    return max(values) if values else None
