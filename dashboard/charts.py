"""Altair charts built from the frames in frames.py. Pure: DataFrame in, chart out."""

from __future__ import annotations

import altair as alt
import pandas as pd

from recommender.report.columns import INVOCATIONS, MODEL_LATENCY

COLOR = alt.Color("configuration:N", title="configuration")


def throughput_over_time(series: pd.DataFrame, windows: pd.DataFrame | None = None) -> alt.LayerChart:
    """Invocations per minute (solid) and users (dashed, right axis) per second, one colour per candidate."""
    base = alt.Chart(series).encode(x=alt.X("second:Q", title="second of the run"), color=COLOR)
    ipm = base.mark_line(point=True).encode(
        y=alt.Y(f"{INVOCATIONS.frame}:Q", title=INVOCATIONS.header),
        tooltip=["configuration", "second", INVOCATIONS.frame, "users"],
    )
    users = base.mark_line(strokeDash=[4, 3]).encode(
        y=alt.Y("users:Q", title="users (dashed)"), color=alt.Color("configuration:N", legend=None)
    )
    layers = [ipm]
    if windows is not None and not windows.empty:
        layers.insert(0, window_bands(windows))
    throughput = alt.layer(*layers).resolve_scale(color="independent")
    return alt.layer(throughput, users).resolve_scale(y="independent").properties(height=320)


def window_bands(windows: pd.DataFrame) -> alt.Chart:
    """Shaded steady-state windows, green when stable, orange when unstable."""
    scale = alt.Scale(domain=["stable", "unstable", "window"], range=["#59a14f", "#f28e2b", "#bab0ac"])
    return (
        alt.Chart(windows)
        .mark_rect(opacity=0.15)
        .encode(
            x="start_s:Q",
            x2="end_s:Q",
            fill=alt.Fill("window:N", scale=scale, title="steady-state window"),
            tooltip=["configuration", "window", "start_s", "end_s"],
        )
    )


def latency_over_time(series: pd.DataFrame) -> alt.Chart:
    """p50 / p95 / p99 per second, one panel row per percentile."""
    long = series.melt(
        id_vars=["configuration", "second"],
        value_vars=["p50_ms", "p95_ms", "p99_ms"],
        var_name="percentile",
        value_name="latency ms",
    ).dropna()
    long["percentile"] = long["percentile"].str.removesuffix("_ms")
    return (
        alt.Chart(long)
        .mark_line(point=True)
        .encode(
            x=alt.X("second:Q", title="second of the run"),
            y=alt.Y("latency ms:Q", title="latency (ms)"),
            color=COLOR,
            strokeDash=alt.StrokeDash("percentile:N"),
            tooltip=["configuration", "percentile", "second", "latency ms"],
        )
        .properties(height=320)
    )


def frontier(levels: pd.DataFrame, percentile: str) -> alt.Chart:
    """Throughput-latency frontier from frames.levels_table: one point per load level, its windows of every repeat
    pooled: the level's mean invocations per minute against the mean of its windows' `percentile` latencies (the
    figures MaxInvocations and ModelLatency are read from at the chosen level)."""
    latency = MODEL_LATENCY.short.format(p=percentile)
    data = levels.dropna(subset=[latency]).sort_values(["configuration", INVOCATIONS.frame])
    return (
        alt.Chart(data)
        .mark_line(point=alt.OverlayMarkDef(size=80))
        .encode(
            x=alt.X(f"{INVOCATIONS.frame}:Q", title=f"{INVOCATIONS.header} (level mean, every repeat)"),
            y=alt.Y(f"{latency}:Q", title=f"{percentile} ms (mean of window {percentile}s)"),
            color=COLOR,
            order=f"{INVOCATIONS.frame}:Q",
            tooltip=[
                "configuration",
                "load",
                "windows (n)",
                alt.Tooltip(f"{INVOCATIONS.frame}:Q", format=",.0f"),
                alt.Tooltip(f"{latency}:Q", format=",.1f"),
            ],
        )
        .properties(height=320)
    )


def server_time(breakdown: pd.DataFrame) -> alt.Chart:
    """Stacked bars of the server-side average time per request: queue vs compute input / infer / output."""
    return (
        alt.Chart(breakdown)
        .mark_bar()
        .encode(
            x=alt.X("ms:Q", title="average time per request (ms)", stack="zero"),
            y=alt.Y("configuration:N", title=None),
            color=alt.Color("part:N", title="server-side part"),
            tooltip=["configuration", "part", alt.Tooltip("ms:Q", format=".3f")],
        )
        .properties(height=alt.Step(28))
    )


def bars(frame: pd.DataFrame, value: str, title: str, color: str = "instance type") -> alt.Chart:
    """Horizontal grouped bars of `value` per configuration, coloured by `color`."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X(f"{value}:Q", title=title),
            y=alt.Y("configuration:N", title=None),
            yOffset=alt.YOffset(f"{color}:N"),
            color=alt.Color(f"{color}:N"),
            tooltip=["configuration", color, alt.Tooltip(f"{value}:Q", format=",.4f")],
        )
        .properties(height=alt.Step(18))
    )


def history(points: pd.DataFrame, value: str, title: str) -> alt.Chart:
    return (
        alt.Chart(points)
        .mark_line(point=alt.OverlayMarkDef(size=80))
        .encode(
            x=alt.X("finished:T", title="measured at"),
            y=alt.Y(f"{value}:Q", title=title),
            tooltip=["experiment", "finished", value],
        )
        .properties(height=300)
    )


def token_lengths(frame: pd.DataFrame) -> alt.Chart:
    """The payload's token-length histogram: requests per range of input tokens (frames.payload_frame)."""
    return (
        alt.Chart(frame)
        .mark_bar()
        .encode(
            x=alt.X("from:Q", bin="binned", title="input tokens per request (the request's own, no padding)"),
            x2="to:Q",
            y=alt.Y("requests:Q", title="requests"),
            tooltip=["input tokens", "requests", alt.Tooltip("share:Q", format=".0%")],
        )
        .properties(height=240)
    )
