"""Server-side sampling during a load run, from the parent process, in a background thread (one sample a second).

Every second: CPU % and RSS of the whole server process tree (tritonserver and every Python backend stub, via
psutil over `deployment.server_pids()`), Triton's statistics snapshot (`deployment.statistics()`), and GPU
utilisation, memory used and power through NVML (nvidia-ml-py, the `[gpu]` extra) when a GPU and NVML exist; otherwise
the run records "no GPU" and why (`gpu_status`).
`window_figures` turns the samples into per-window figures aligned with the load's clock.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import psutil

from recommender.hardware import GpuStatus
from recommender.metrics.triton_stats import stats_delta


class Sampled(Protocol):
    def statistics(self) -> dict[str, Any]: ...

    def server_pids(self) -> list[int]: ...


@dataclass(frozen=True)
class Sample:
    at: float  # wall clock, epoch seconds
    cpu_percent: float | None  # whole server tree, % of one core
    rss_bytes: int | None
    processes: int
    statistics: dict[str, Any] | None
    gpu: dict[str, float] | None  # utilisation %, memory used bytes, power W (all GPUs)


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


def gpu_probe() -> tuple[Callable[[], dict[str, float]] | None, str]:
    """A function reading all GPUs' utilisation and memory, or None with the reason it is unavailable."""
    try:
        import pynvml
    except ImportError:
        return None, GpuStatus(why_none="nvidia-ml-py not installed").text
    try:
        pynvml.nvmlInit()
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    except Exception as exc:  # NVMLError without a GPU or driver
        return None, GpuStatus(why_none=str(exc)).text
    if not handles:
        return None, GpuStatus(why_none="NVML found no device").text

    def read() -> dict[str, float]:
        util = [pynvml.nvmlDeviceGetUtilizationRates(h).gpu for h in handles]
        memory = [pynvml.nvmlDeviceGetMemoryInfo(h).used for h in handles]
        figures = {"utilization_percent": sum(util) / len(util), "memory_used_bytes": float(sum(memory))}
        with contextlib.suppress(Exception):  # milliwatts, all GPUs together; some boards do not report power
            figures["power_w"] = sum(pynvml.nvmlDeviceGetPowerUsage(h) for h in handles) / 1000.0
        return figures

    return read, GpuStatus(len(handles)).text


@dataclass
class ServerSampler:
    """Samples a deployment once a second in a daemon thread while used as a context manager."""

    deployment: Sampled
    interval_s: float = 1.0
    samples: list[Sample] = field(default_factory=list)
    gpu_status: str = GpuStatus().text
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def __enter__(self) -> ServerSampler:
        self._gpu, self.gpu_status = gpu_probe()
        self._tree = ProcessTree()
        self._thread = threading.Thread(target=self._run, name="server-sampler", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

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
        gpu = self._gpu() if self._gpu else None
        return Sample(at, cpu, rss, count, statistics, gpu)


def window_figures(samples: list[Sample], started_at: float, start_s: float, end_s: float) -> dict[str, Any]:
    """Server figures of one window [start_s, end_s) of a load that started at `started_at` (epoch s)."""
    inside = [s for s in samples if start_s <= s.at - started_at < end_s]
    figures: dict[str, Any] = {
        "server_cpu_percent": _mean([s.cpu_percent for s in inside if s.cpu_percent is not None]),
        "server_rss_mb": _max([s.rss_bytes / 2**20 for s in inside if s.rss_bytes is not None]),
        "server_processes": _max([s.processes for s in inside]),
        "gpu_utilization_percent": _mean([s.gpu["utilization_percent"] for s in inside if s.gpu]),
        "gpu_memory_mb": _max([s.gpu["memory_used_bytes"] / 2**20 for s in inside if s.gpu]),
        "gpu_power_w": _mean([s.gpu["power_w"] for s in inside if s.gpu and "power_w" in s.gpu]),
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


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _max(values: list[float]) -> float | None:
    return max(values) if values else None
