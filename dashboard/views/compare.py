"""Compare page: two to four candidates side by side, decided under the sidebar's settings: their figures, every
load level with the stability rule's numbers, and how their configurations differ."""

from __future__ import annotations

import streamlit as st

from dashboard import frames, source
from dashboard.selection import decision_in_view
from dashboard.text import show_table
from recommender.candidates import RunStatus
from recommender.metrics.limits import Limits
from recommender.metrics.rules import WindowRules
from recommender.metrics.stability import RULE

MAX_COMPARED = 4


def main() -> None:
    view = decision_in_view()
    if view is None:
        return
    info, results = view.info, view.results
    if len(results) < 2:
        st.info("Comparing needs at least two candidates in the experiment.")
        return
    by_name = {r.name: r for r in results}
    ok = [r.name for r in results if r.status == RunStatus.OK]
    default = (ok or list(by_name))[:2]
    chosen = st.multiselect(
        "Candidates (2 to 4)", list(by_name), default=default, max_selections=MAX_COMPARED, key=f"compare:{info.name}"
    )
    if len(chosen) < 2:
        st.info("Pick at least two candidates.")
        return
    picked = [by_name[name] for name in chosen]
    st.subheader("Figures")
    show_table(frames.metrics_table(picked))
    levels(picked, view.rules, view.limits)
    st.subheader("Configuration")
    difference = frames.config_difference(picked)
    only_diff = st.toggle("Only the settings that differ", value=True, key=f"compare-diff:{info.name}")
    shown = difference[difference["differs"]] if only_diff else difference
    show_table(shown.drop(columns="differs") if only_diff else shown)


def levels(picked: list, rules: WindowRules, limits: Limits) -> None:
    """Every load level of the picked runs (all repeats pooled) with its verdict and stability numbers."""
    st.subheader("Load levels and stability")
    st.caption(
        f"Stability rule: {RULE} (here: at least {rules.stable_windows} windows, tolerance "
        f"{rules.stability_tolerance:.0%}). SE = relative standard error of the level mean; slope t = the "
        "trend's t statistic across the windows."
    )
    frame = frames.levels_table(picked, source.window_records, limits, rules)
    if frame.empty:
        st.info("No steady-state windows stored for these runs.")
        return
    show_table(frame, hide_index=True)


st.title("Compare")
main()
