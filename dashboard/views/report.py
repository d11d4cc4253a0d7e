"""Report page: the cost report in Markdown, HTML or CSV, rendered by recommender.report (as `recommender report`)."""

from __future__ import annotations

import streamlit as st

from dashboard import decision
from dashboard.selection import decision_in_view
from recommender.report import RENDERERS

MIME = {"md": "text/markdown", "html": "text/html", "csv": "text/csv"}


def main() -> None:
    view = decision_in_view()
    if view is None:
        return
    info, spec, settings = view.info, view.spec, view.settings
    report = decision.report(view.recommendation)
    if settings != decision.from_spec(spec):
        st.caption("The sidebar settings differ from the experiment file: the report below uses the sidebar's.")
    else:
        st.caption(f"Same as `recommender report {info.name} --format md|html|csv`.")
    columns = st.columns(len(RENDERERS))
    for column, (fmt, render) in zip(columns, RENDERERS.items(), strict=False):
        column.download_button(
            f"Download {fmt}",
            render(report),
            file_name=f"{info.name}-report.{fmt}",
            mime=MIME[fmt],
            key=f"download-{fmt}",
        )
    with st.expander("Markdown preview (as text)", expanded=True):
        st.code(RENDERERS["md"](report), language="markdown")


st.title("Report")
main()
