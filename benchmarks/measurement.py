"""Shared by the benchmark scripts: window statistics from the load driver's exact log, repeat summaries, tables.

No Locust import (the load driver runs Locust in its own child process); numpy only.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]


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


@dataclass(frozen=True)
class ToolRun:
    """A reference tool run to completion: exit code, combined output, CPU seconds it used, wall seconds."""

    returncode: int
    output: str
    cpu_s: float
    wall_s: float


def run_tool(command: Sequence[str], env: dict[str, str] | None = None) -> ToolRun:
    """Run `command` to the end, measuring its own CPU time (rusage of that child); killed if we are interrupted."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(list(command), stdout=output, stderr=subprocess.STDOUT, env=env)
        try:
            _, status, usage = os.wait4(process.pid, 0)
        except BaseException:
            process.kill()
            process.wait()
            raise
        wall_s = time.monotonic() - started
        output.seek(0)
        text = output.read().decode(errors="replace")
    return ToolRun(os.waitstatus_to_exitcode(status), text, usage.ru_utime + usage.ru_stime, wall_s)


def cpu_seconds(timeline_t_s: np.ndarray, cpu_percent: np.ndarray, start_s: float, end_s: float) -> float:
    """CPU seconds used by the load generator in [start_s, end_s]: the sum of its per-second CPU % / 100.

    Each sample covers the second before it, so the samples taken in (start_s, end_s] are summed.
    """
    inside = (timeline_t_s > start_s) & (timeline_t_s <= end_s + 0.5)
    return float(np.sum(cpu_percent[inside]) / 100.0)


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
