"""Curves page: throughput and users over time, latency percentiles over time, the throughput-latency frontier,
the server-side time split and the GPU figures per window, with the hardware and backend of each run."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, frames, gpu, source
from dashboard.selection import in_view, measured, nothing_measured
from recommender.candidates import CandidateResult
from recommender.metrics.limits import Limits
from recommender.review import stored_spec
from recommender.vocabulary import DEFAULT_PERCENTILE, PERCENTILE_NAMES


def pick(info_name: str, candidates: list[CandidateResult]) -> list[CandidateResult]:
    names = [r.name for r in candidates]
    chosen = st.multiselect("Candidates", names, default=names, key=f"curves:{info_name}")
    return [r for r in candidates if r.name in chosen]


def over_time(picked: list[CandidateResult]) -> None:
    series = pd.concat([frames.series_frame(r, source.second_rows(r.run_id)) for r in picked], ignore_index=True)
    if series.empty:
        st.info("No per-second series stored for these runs.")
        return
    windows = pd.concat([frames.windows_frame(r, source.window_rows(r.run_id)) for r in picked], ignore_index=True)
    st.subheader("Invocations per minute and users over time")
    st.altair_chart(charts.throughput_over_time(series, windows), width="stretch")
    if windows.empty:
        st.caption("No steady-state windows stored for these runs (stable / unstable marks appear when present).")
    st.subheader("Latency percentiles over time")
    st.altair_chart(charts.latency_over_time(series), width="stretch")


def frontier(picked: list[CandidateResult], default_percentile: str) -> None:
    st.subheader("Throughput-latency frontier (one point per load level, every repeat pooled)")
    shown = default_percentile if default_percentile in PERCENTILE_NAMES else DEFAULT_PERCENTILE
    index = PERCENTILE_NAMES.index(shown)
    percentile = st.selectbox("Percentile", PERCENTILE_NAMES, index=index, key="curves-percentile")
    limits = Limits(percentile=percentile)  # the charted figures do not depend on the threshold or the error limit
    levels = frames.levels_table(picked, source.window_records, limits)
    if levels.empty:
        st.info("No steady-state windows stored for these runs.")
        return
    st.caption(
        f"Each point is a load level: its mean invocations per minute and the mean of its windows' {percentile} "
        "latencies, over the windows of every repeat (the figures MaxInvocations and ModelLatency come from)."
    )
    st.altair_chart(charts.frontier(levels, percentile), width="stretch")


def generation_curve(picked: list[CandidateResult], limits: Limits) -> None:
    """A generative experiment's curve: tokens/s per user against tokens/s per instance, the SLO frontier marked."""
    levels = frames.generation_levels(picked, source.window_records, limits)
    if levels.empty:
        return
    st.subheader("Output tokens/s per user against per instance (one point per load level, every repeat pooled)")
    st.caption(
        "Each point is a load level: higher load moves it up (more tokens/s for the instance) and left (fewer for "
        "each user). A circle meets every SLO term, a cross breaches one; the dashed rule is the highest instance "
        "throughput that meets them."
    )
    st.altair_chart(charts.generation_curve(levels), width="stretch")


def server_time(picked: list[CandidateResult]) -> None:
    st.subheader("Server-side time per request: queue vs compute")
    breakdown = frames.server_breakdown(picked)
    if breakdown.empty:
        st.info("No server-side statistics stored for these runs.")
        return
    st.altair_chart(charts.server_time(breakdown), width="stretch")


def hardware_and_gpu(picked: list[CandidateResult]) -> None:
    st.subheader("Hardware, backend and GPU")
    for line in gpu.served_lines(picked):
        st.markdown(f"- {line}")
    figures = pd.concat([gpu.gpu_frame(r, source.window_rows(r.run_id)) for r in picked], ignore_index=True)
    if figures.empty:
        st.info(
            "No GPU figures stored for these runs: they served without a GPU (or without NVML); see the reasons above."
        )
        return
    st.altair_chart(gpu.gpu_chart(figures), width="stretch")


def main() -> None:
    info = in_view()
    if info is None:
        return
    results = source.results(info.name)
    candidates = measured(results)
    if not candidates:
        nothing_measured(info, results)
        return
    picked = pick(info.name, candidates)
    if not picked:
        st.info("Pick at least one candidate.")
        return
    over_time(picked)
    frontier(picked, (info.spec.get("latency_threshold") or {}).get("percentile", DEFAULT_PERCENTILE))
    generation_curve(picked, Limits.from_spec(stored_spec(info.name, info.spec)))
    server_time(picked)
    hardware_and_gpu(picked)


st.title("Curves")
main()
