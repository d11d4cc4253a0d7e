"""Compare page: two to four candidates side by side, their figures and how their configurations differ."""

from __future__ import annotations

import streamlit as st

from dashboard import frames, source
from dashboard.selection import in_view

MAX_COMPARED = 4


def main() -> None:
    info = in_view()
    if info is None:
        return
    results = source.results(info.name)
    if len(results) < 2:
        st.info("Comparing needs at least two candidates in the experiment.")
        return
    by_name = {r.name: r for r in results}
    ok = [r.name for r in results if r.status == "ok"]
    default = (ok or list(by_name))[:2]
    chosen = st.multiselect("Candidates (2 to 4)", list(by_name), default=default, max_selections=MAX_COMPARED,
                            key=f"compare:{info.name}")
    if len(chosen) < 2:
        st.info("Pick at least two candidates.")
        return
    picked = [by_name[name] for name in chosen]
    st.subheader("Figures")
    st.dataframe(frames.metrics_table(picked), width="stretch")
    st.subheader("Configuration")
    difference = frames.config_difference(picked)
    only_diff = st.toggle("Only the settings that differ", value=True, key=f"compare-diff:{info.name}")
    shown = difference[difference["differs"]] if only_diff else difference
    st.dataframe(shown.drop(columns="differs") if only_diff else shown, width="stretch")


st.title("Compare")
main()
