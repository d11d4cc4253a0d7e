"""Reports of a recommendation: one row model (rows.py) laid out as Markdown, HTML or CSV."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from recommender.report.csv_table import render_csv
from recommender.report.html import render_html
from recommender.report.markdown import render_markdown
from recommender.report.rows import Report, build_report

RENDERERS: Mapping[str, Callable[[Report], str]] = MappingProxyType(
    {"md": render_markdown, "html": render_html, "csv": render_csv}
)

__all__ = ["RENDERERS", "Report", "build_report", "render_csv", "render_html", "render_markdown"]
