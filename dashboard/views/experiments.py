"""Experiments page: every stored experiment with its status, dates and candidate counts; then the selected one."""

from __future__ import annotations

import pandas as pd
import streamlit as st
import yaml

from dashboard import charts, frames, source
from dashboard.selection import running_notice, selected
from dashboard.text import escape, metric_column, no_experiments, seconds_column, show_table
from recommender.candidates import CandidateResult, RunStatus
from recommender.decide.recommendation import payload_of
from recommender.metrics.stage_times import time_spent
from recommender.report.columns import ERROR_RATE

CANDIDATE_COLUMNS = {
    "reason": st.column_config.TextColumn("reason", width="large"),
    "duration (s)": seconds_column(),
    ERROR_RATE.frame: metric_column(ERROR_RATE),
}


def overview() -> None:
    infos = source.experiments()
    if not infos:
        no_experiments()
        return
    show_table(
        frames.experiments_table(infos, source.results),
        hide_index=True,
        column_config={"measured time (s)": seconds_column()},
    )


def detail() -> None:
    info = selected()
    if info is None:
        return
    st.subheader(f"Experiment {escape(info.name)}")
    running_notice(info)
    results = source.results(info.name)
    st.caption(
        f"status {escape(info.status)}; created {info.created_at:%Y-%m-%d %H:%M}; "
        f"last update {info.updated_at:%Y-%m-%d %H:%M}"
    )
    if results:
        show_table(frames.candidates_table(results), hide_index=True, column_config=CANDIDATE_COLUMNS)
    else:
        st.info("No candidates stored for this experiment yet.")
    payload_sent(results)
    time_went(results)
    for r in results:
        if r.status in (RunStatus.FAILED, RunStatus.INTERRUPTED) and r.reason:
            with st.expander(f"Why {escape(r.name)} {r.status}"):
                st.code(r.reason, language=None, wrap_lines=True)
    with st.expander("Experiment file (as stored)"):
        st.code(yaml.safe_dump(info.spec, sort_keys=False), language="yaml")


def payload_sent(results: list[CandidateResult]) -> None:
    """What the runs were sent: where the requests came from and their token-length histogram (runs stored before
    migration 0008 recorded no payload)."""
    payload = payload_of(results)
    if payload is None:
        return
    st.subheader("Payload")
    st.caption(escape(payload.describe()))
    st.altair_chart(charts.token_lengths(frames.payload_frame(payload)), width="stretch")


def time_went(results: list[CandidateResult]) -> None:
    """Seconds per stage over the experiment's runs (runs stored before stages were timed have none)."""
    spent = time_spent(r.server.stages for r in results)
    if not spent:
        return
    st.subheader("Where the time went")
    total = sum(spent.values())
    frame = pd.DataFrame(
        {"stage": list(spent), "seconds": list(spent.values()), "share": [v / total for v in spent.values()]}
    )
    st.bar_chart(frame, x="stage", y="seconds", horizontal=True, sort=False)
    show_table(
        frame,
        hide_index=True,
        column_config={"seconds": seconds_column(), "share": st.column_config.NumberColumn(format="percent")},
    )


st.title("Experiments")
overview()
detail()
