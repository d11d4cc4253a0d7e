"""History page: the same candidate (same configuration key) across every run that measured it, in every experiment
and under every measurement protocol (older protocols are only shown here: the decision pages read the current one).
The figures are as each run stored them, decided under the limits it was measured with."""

from __future__ import annotations

import streamlit as st

from dashboard import charts, frames, source
from dashboard.selection import selected
from dashboard.text import escape, show_table
from recommender.report.columns import ERROR_RATE, INVOCATIONS, MODEL_LATENCY
from recommender.vocabulary import DEFAULT_PERCENTILE


def points(key: str, percentile: str) -> list[dict]:
    """One record per finished run of a candidate with this key, in any experiment, under any protocol."""
    rows = []
    for info in source.experiments():
        current = source.store().current_protocols(info.name)
        for r in source.history(info.name):
            if r.key != key:
                continue
            h = r.headline
            protocol = f"{r.protocol_key} ({'current' if r.protocol_key in current else 'older'})"
            rows.append(
                {
                    "experiment": info.name,
                    "protocol": protocol,
                    "finished": r.finished_at,
                    "status": r.status,
                    INVOCATIONS.frame: h.invocations_per_minute if h else None,
                    MODEL_LATENCY.short.format(p=percentile): h.latency(percentile) if h else None,
                    ERROR_RATE.frame: h.error_rate if h else None,
                    "reason": frames.first_line(r.reason),
                }
            )
    return sorted(rows, key=lambda row: (row["finished"] is None, row["finished"] or 0))


def main() -> None:
    info = selected()
    if info is None:
        return
    results = source.results(info.name)
    if not results:
        st.info(f"{escape(info.name)} has no candidates stored yet.")
        return
    labels = {f"{r.name} ({r.key})": r for r in results}
    label = st.selectbox("Candidate", list(labels), key=f"history:{info.name}")
    candidate = labels[label]
    percentile = (info.spec.get("latency_threshold") or {}).get("percentile", DEFAULT_PERCENTILE)
    table = frames.history_table(points(candidate.key, percentile))
    show_table(table, hide_index=True)
    ok = table[table["status"] == "ok"].dropna(subset=["finished"])
    if len(ok) < 2:
        st.info(
            "This configuration was measured successfully in only one experiment so far; "
            "the chart appears once another experiment measures the same configuration."
        )
        return
    left, right = st.columns(2)
    latency = MODEL_LATENCY.short.format(p=percentile)
    left.altair_chart(charts.history(ok, INVOCATIONS.frame, INVOCATIONS.header), width="stretch")
    right.altair_chart(charts.history(ok, latency, f"{percentile} latency (ms)"), width="stretch")


st.title("History")
st.caption("The same configuration key across experiments over time.")
main()
