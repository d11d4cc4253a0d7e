"""Report page: the cost report in Markdown, HTML or CSV, rendered by recommender.report (as `recommender report`)."""

from __future__ import annotations

import streamlit as st

from dashboard import decision, source
from dashboard.selection import running_notice, selected
from dashboard.text import show_error
from recommender.errors import RecommenderError
from recommender.report import RENDERERS

MIME = {"md": "text/markdown", "html": "text/html", "csv": "text/csv"}


def main() -> None:
    info = selected()
    if info is None:
        return
    running_notice(info)
    try:
        spec = decision.spec_of(info)
        settings = decision.controls(info, spec)
        report = decision.report(decision.recommendation(spec, source.results(info.name), settings))
    except RecommenderError as error:
        show_error(error)
        return
    if settings != decision.from_spec(spec):
        st.caption("The sidebar settings differ from the experiment file: the report below uses the sidebar's.")
    else:
        st.caption(f"Same as `recommender report {info.name} --format md|html|csv`.")
    columns = st.columns(len(RENDERERS))
    for column, (fmt, render) in zip(columns, RENDERERS.items()):
        column.download_button(f"Download {fmt}", render(report), file_name=f"{info.name}-report.{fmt}",
                               mime=MIME[fmt], key=f"download-{fmt}")
    with st.expander("Markdown preview (as text)", expanded=True):
        st.code(RENDERERS["md"](report), language="markdown")


st.title("Report")
main()
