"""GPU figures on the curves page: NVML utilisation, memory used and power per steady-state window (stored with
every window, metrics/host.py), and the hardware and backend each run served on. Pure frames and charts; the page
draws them."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from recommender.candidates import CandidateResult
from recommender.hardware import describe_gpu, describe_served

GPU_COLUMNS = {
    "gpu_utilization_percent": "utilisation (%)",
    "gpu_memory_mb": "memory used (MiB)",
    "gpu_power_w": "power (W)",
}


def gpu_frame(result: CandidateResult, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """One row per window and GPU figure (configuration, second = window middle, figure, value); empty without any."""
    points = [
        {
            "configuration": result.name,
            "second": (row["start_s"] + row["end_s"]) / 2,
            "figure": label,
            "value": row[column],
        }
        for row in rows
        if row.get("start_s") is not None and row.get("end_s") is not None
        for column, label in GPU_COLUMNS.items()
        if row.get(column) is not None
    ]
    return pd.DataFrame(points, columns=["configuration", "second", "figure", "value"])


def gpu_chart(frame: pd.DataFrame) -> alt.FacetChart:
    """One small chart per figure, one line per candidate, over the run's seconds."""
    return (
        alt.Chart(frame)
        .mark_line(point=True)
        .encode(
            x=alt.X("second:Q", title="second of the run (window middle)"),
            y=alt.Y("value:Q", title=None),
            color=alt.Color("configuration:N", title="configuration"),
            tooltip=["configuration", "figure", "second", "value"],
        )
        .properties(height=160)
        .facet(row=alt.Row("figure:N", title=None))
        .resolve_scale(y="independent")
    )


def served_lines(picked: list[CandidateResult]) -> list[str]:
    """`name: what it served on, backend; GPU figures or why there is no GPU`, per candidate."""
    lines = []
    for r in picked:
        served = describe_served(r.hardware, r.backend) or "hardware not recorded (run stored before it was)"
        gpu = describe_gpu(r.server_stats)
        lines.append(f"{r.name}: {served}" + (f"; GPU at MaxInvocations: {gpu}" if gpu else ""))
    return lines
