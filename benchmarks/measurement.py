"""Shared by the benchmark scripts: window statistics from the load driver's exact log, repeat summaries, tables.

Every tool is scored on its own clock from its own first send: the window is [first send + warm-up, + window
length], and a run that stopped before the window's end is refused (ShortRun), never divided by a span it did not
cover. CPU in a window comes from cumulative CPU samples, interpolated at the window's ends, for every tool alike.

No Locust import (the load driver runs Locust in its own child process); numpy and psutil only.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil

REPO_ROOT = Path(__file__).resolve().parents[1]
TAIL_S = 1.0  # every tool runs this long past its window's end, so the window from its first send is covered


def use_this_checkout() -> None:
    """Import `recommender` from this checkout, not from whatever copy is installed in site-packages."""
    root = str(REPO_ROOT)
    if root not in sys.path[:1]:
        sys.path.insert(0, root)


@dataclass(frozen=True)
class WindowStats:
    """Closed-loop figures of one measured window: successful requests per second and latency percentiles (ms)."""

    throughput: float
    p50_ms: float
    p95_ms: float
    requests: int
    failures: int


def window_stats(t_s: np.ndarray, latency_us: np.ndarray, ok: np.ndarray, start_s: float, end_s: float) -> WindowStats:
    """Requests sent at or after `start_s` and completed by `end_s` (perf_analyzer's rule for a window).

    Throughput counts the successful ones over the window length; percentiles are over their exact latencies.
    """
    done_s = t_s + latency_us / 1e6
    inside = (t_s >= start_s) & (done_s <= end_s)
    good = inside & ok
    latencies_ms = latency_us[good] / 1000.0
    if latencies_ms.size == 0:
        return WindowStats(0.0, float("nan"), float("nan"), 0, int(np.count_nonzero(inside & ~ok)))
    p50, p95 = np.percentile(latencies_ms, [50, 95])
    return WindowStats(
        throughput=int(np.count_nonzero(good)) / (end_s - start_s),
        p50_ms=float(p50),
        p95_ms=float(p95),
        requests=int(np.count_nonzero(good)),
        failures=int(np.count_nonzero(inside & ~ok)),
    )


class ShortRun(RuntimeError):
    """A tool's run stopped before the end of the window it is scored on: refused, not scored on a shorter span."""


def aligned_window(
    tool: str, first_send_s: float, covered_until_s: float, warmup_s: float, window_s: float
) -> tuple[float, float]:
    """(start, end) of the scoring window on a tool's own clock: `warmup_s` after its first send, `window_s` long.

    `covered_until_s` (same clock) is how far the tool's run reached; raises ShortRun when that is before the end.
    """
    start, end = first_send_s + warmup_s, first_send_s + warmup_s + window_s
    if covered_until_s < end:
        raise ShortRun(
            f"{tool} ran {covered_until_s - first_send_s:.2f} s from its first send, short of the "
            f"{warmup_s:g} s warm-up + {window_s:g} s window it is scored on: refused (its throughput over the "
            "full window would be understated); rerun it, or on a busy host give it a longer run"
        )
    return start, end


def log_window(
    tool: str, t_s: np.ndarray, covered_until_s: float, warmup_s: float, window_s: float
) -> tuple[float, float]:
    """aligned_window for a per-request log (send times `t_s`); a log without a request is a short run too."""
    if len(t_s) == 0:
        raise ShortRun(f"{tool} sent no request")
    return aligned_window(tool, float(np.min(t_s)), covered_until_s, warmup_s, window_s)


def cpu_between(t_s: np.ndarray, cumulative_s: np.ndarray, start_s: float, end_s: float) -> float:
    """CPU seconds used in [start_s, end_s] from cumulative CPU seconds sampled at `t_s` (linear between samples)."""
    if len(t_s) == 0 or start_s < t_s[0] or end_s > t_s[-1]:
        span = f"{t_s[0]:.2f}..{t_s[-1]:.2f} s" if len(t_s) else "nothing"
        raise ShortRun(f"CPU samples cover {span}, not the window {start_s:.2f}..{end_s:.2f} s")
    return float(np.interp(end_s, t_s, cumulative_s) - np.interp(start_s, t_s, cumulative_s))


def cpu_seconds(timeline_t_s: np.ndarray, cpu_percent: np.ndarray, start_s: float, end_s: float) -> float:
    """CPU seconds our load generator used in [start_s, end_s], from its Timeline's CPU % samples.

    Each sample is the generator's CPU share since the one before it (the first: since the clock started at 0); as
    cumulative CPU seconds they are read like any other tool's samples (cpu_between).
    """
    times = np.concatenate([[0.0], np.asarray(timeline_t_s, dtype=float)])
    used = np.asarray(cpu_percent, dtype=float) / 100.0 * np.diff(times)
    return cpu_between(times, np.concatenate([[0.0], np.cumsum(used)]), start_s, end_s)


class CpuSampler:
    """Cumulative CPU seconds (user + system) of named processes every `every_s` on time.monotonic(), in a thread.

    A context manager; `watch` adds a process (its samples stop when it exits); `cpu_between` reads a window.
    """

    def __init__(self, every_s: float = 0.1) -> None:
        self.every_s = every_s
        self._processes: dict[str, psutil.Process] = {}
        self._samples: dict[str, list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def __enter__(self) -> CpuSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def watch(self, name: str, pid: int) -> None:
        with self._lock:
            self._processes[name] = psutil.Process(pid)
            self._samples[name] = []
            self._sample(name, self._processes[name])

    def cpu_between(self, name: str, start_s: float, end_s: float) -> float:
        with self._lock:
            samples = np.array(self._samples[name], dtype=float).reshape(-1, 2)
        return cpu_between(samples[:, 0], samples[:, 1], start_s, end_s)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                for name, process in list(self._processes.items()):
                    self._sample(name, process)

    def _sample(self, name: str, process: psutil.Process) -> None:
        try:
            times = process.cpu_times()
        except psutil.Error:  # it exited: its samples end here
            del self._processes[name]
            return
        self._samples[name].append((time.monotonic(), times.user + times.system))


@dataclass(frozen=True)
class ToolRun:
    """A reference tool run to completion: exit code, combined output, CPU seconds it used, wall seconds."""

    returncode: int
    output: str
    cpu_s: float
    wall_s: float


def run_tool(
    command: Sequence[str], env: dict[str, str] | None = None, on_start: Callable[[int], None] | None = None
) -> ToolRun:
    """Run `command` to the end, measuring its own CPU time (rusage of that child); killed if we are interrupted.

    `on_start` is called with the child's pid as soon as it runs (e.g. CpuSampler.watch).
    """
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(list(command), stdout=output, stderr=subprocess.STDOUT, env=env)
        try:
            if on_start is not None:
                on_start(process.pid)
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        wall_s = time.monotonic() - started
        output.seek(0)
        text = output.read().decode(errors="replace")
    return ToolRun(os.waitstatus_to_exitcode(status), text, usage.ru_utime + usage.ru_stime, wall_s)


@dataclass(frozen=True)
class Summary:
    """Median and spread (min..max) of one figure over the repeats."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values) if self.values else float("nan")

    @property
    def spread(self) -> str:
        if not self.values:
            return "n/a"
        return f"{_number(min(self.values))}..{_number(max(self.values))}"

    @property
    def relative_spread(self) -> float:
        """(max - min) / median: how noisy the repeats were."""
        median = self.median
        return (max(self.values) - min(self.values)) / median if self.values and median else float("nan")


def summarise(values: Sequence[float]) -> Summary:
    return Summary(tuple(float(v) for v in values))


def ratio(ours: float, theirs: float) -> float:
    return ours / theirs if theirs else float("nan")


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A Markdown table (pipe-separated), readable in a terminal and pasteable into docs."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max(len(str(h)), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    line = lambda values: "| " + " | ".join(str(v).ljust(w) for v, w in zip(values, widths, strict=False)) + " |"
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])


def _number(value: float) -> str:
    if value != value:
        return "nan"
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _cell(value: object) -> str:
    return _number(value) if isinstance(value, float) else str(value)
