"""Altair charts built from the frames in frames.py. Pure: DataFrame in, chart out."""

from __future__ import annotations

import altair as alt
import pandas as pd

from recommender.report.columns import GOODPUT, INVOCATIONS, MODEL_LATENCY, OUTPUT_TPS, OUTPUT_TPS_PER_USER

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


def generation_curve(levels: pd.DataFrame) -> alt.LayerChart:
    """The curve LLM users read first, from frames.generation_levels: output tokens/s per user (x) against output
    tokens/s per instance (y), one point per load level joined in load order; the SLO frontier is marked: a circle
    meets every SLO term, a cross breaches one, and a dashed rule stands at the highest instance throughput that
    meets them."""
    x, y = OUTPUT_TPS_PER_USER.frame, OUTPUT_TPS.frame
    data = levels.dropna(subset=[x, y]).sort_values(["configuration", "load"])
    base = alt.Chart(data).encode(
        x=alt.X(f"{x}:Q", title=f"{OUTPUT_TPS_PER_USER.header} (level mean)"),
        y=alt.Y(f"{y}:Q", title=f"{OUTPUT_TPS.header} (level mean)"),
        color=COLOR,
    )
    line = base.mark_line().encode(order="load:Q")
    marks = alt.Scale(domain=[True, False], range=["circle", "cross"])
    points = base.mark_point(size=90, filled=True).encode(
        shape=alt.Shape("meets SLO:N", title="meets the SLO", scale=marks),
        tooltip=[
            "configuration",
            "load",
            alt.Tooltip(f"{x}:Q", format=",.1f"),
            alt.Tooltip(f"{y}:Q", format=",.0f"),
            alt.Tooltip(f"{GOODPUT.frame}:Q", format=",.2f"),
            "meets SLO",
            "why",
        ],
    )
    best = data[data["meets SLO"]]
    layers = [line, points]
    if not best.empty:
        frontier = pd.DataFrame({y: [best[y].max()], "label": ["SLO frontier"]})
        layers.append(alt.Chart(frontier).mark_rule(strokeDash=[6, 4], color="#e15759").encode(y=f"{y}:Q"))
    return alt.layer(*layers).properties(height=340)


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
