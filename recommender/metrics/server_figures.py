"""The server-side figures of a steady-state window, listed once: the stored window columns, the level means and
a request's server time by part are all read from this list (tests/unit/test_server_figures.py checks it against
the store's window columns)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ServerFigure:
    """One server-side figure of a window: its stored name (the window column), unit and label; `part` names the
    piece of a request's server time it measures (Triton's queue and compute stages), else ""."""

    name: str
    unit: str
    label: str
    part: str = ""


FIGURES: tuple[ServerFigure, ...] = (
    ServerFigure("server_cpu_percent", "%", "server CPU (%)"),
    ServerFigure("server_rss_mb", "MiB", "server memory (MiB)"),
    ServerFigure("gpu_utilization_percent", "%", "utilisation (%)"),
    ServerFigure("gpu_memory_mb", "MiB", "memory used (MiB)"),
    ServerFigure("gpu_power_w", "W", "power (W)"),
    ServerFigure("queue_us", "us", "queue time per request (us)", part="queue"),
    ServerFigure("compute_input_us", "us", "compute input time per request (us)", part="compute_input"),
    ServerFigure("compute_infer_us", "us", "compute infer time per request (us)", part="compute_infer"),
    ServerFigure("compute_output_us", "us", "compute output time per request (us)", part="compute_output"),
    ServerFigure("executions", "executions", "model executions"),
    ServerFigure("inferences", "inferences", "inferences"),
    ServerFigure("avg_batch_size", "requests", "average batch size"),
)

SERVER_FIGURES: tuple[str, ...] = tuple(figure.name for figure in FIGURES)  # the window columns, by name
SERVER_PARTS: tuple[str, ...] = tuple(figure.part for figure in FIGURES if figure.part)  # a request's server time
