"""Search page: the order the candidates were tried in, their figures, and the pruned ones with their partial figures
and the reason (adaptive search); under grid search, every candidate once, in order."""

from __future__ import annotations

import altair as alt
import streamlit as st

from dashboard import source
from dashboard.search_path import search_path
from dashboard.selection import selected
from dashboard.text import escape, metric_column, seconds_column, show_table
from recommender.candidates import RunStatus
from recommender.report.columns import MAX_INVOCATIONS

FIGURE = f",.{MAX_INVOCATIONS.digits}f"  # MaxInvocations in a tooltip, as the CLI prints it (d3 format)


def columns() -> dict:
    """The figures in the catalog's format (MaxInvocations and its interval), the load as given, seconds to a tenth."""
    figures = {
        name: metric_column(MAX_INVOCATIONS, name) for name in ("MaxInvocations", "interval low", "interval high")
    }
    return figures | {"level": st.column_config.NumberColumn(format="%g"), "duration (s)": seconds_column()}


def main() -> None:
    info = selected()
    if info is None:
        return
    strategy = ((info.spec.get("search") or {}).get("strategy")) or "grid"
    table = search_path(source.history(info.name), source.store().current_protocol(info.name))
    if table.empty:
        st.info(f"{escape(info.name)} has no finished run yet.")
        return
    st.caption(
        f"search: {escape(strategy)}; {len(table)} runs in the order they ran; pruned: "
        f"{(table['status'] == RunStatus.PRUNED).sum()} (measured briefly, figures partial)"
    )
    points = (
        alt.Chart(table)
        .mark_point(filled=True, size=80)
        .encode(
            x=alt.X("step:Q", axis=alt.Axis(format="d", tickMinStep=1)),  # steps are whole numbers
            y=alt.Y("MaxInvocations:Q", title="MaxInvocations (IPM)"),
            color="status:N",
            tooltip=[
                "step",
                "configuration",
                "status",
                "repeats",
                "level",
                alt.Tooltip("MaxInvocations:Q", format=FIGURE),
                "interval",
                "reason",
            ],
        )
    )
    bars = (
        alt.Chart(table.dropna(subset=["interval low"]))
        .mark_rule()
        .encode(x="step:Q", y="interval low:Q", y2="interval high:Q", color="status:N")
    )
    st.altair_chart(bars + points, width="stretch")
    show_table(table, hide_index=True, column_config=columns())


st.title("Search")
st.caption("The order the candidates were tried in; pruned ones with their partial figures and the reason.")
main()
