"""Showing user strings safely (experiment, model and candidate names, failure reasons), the common notices, and
tables as the CLI prints them ('-' where a value is missing, figures in the metric catalog's format)."""

from __future__ import annotations

import re
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.elements.lib.column_types import ColumnConfig

from recommender.errors import RecommenderError
from recommender.report.columns import Metric

MISSING = "-"  # what the CLI prints where a figure is missing

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:])")


def escape(text: object) -> str:
    """`text` with every Markdown (and HTML-looking) character backslash-escaped, for st.markdown-based calls."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", str(text))


def show_error(error: RecommenderError) -> None:
    """A RecommenderError as the CLI would tell it: message and hint, never a traceback."""
    st.error(escape(error.message), icon="⚠️")
    if error.hint:
        st.info(escape(error.hint))


def no_experiments() -> None:
    st.info(
        "No experiments in this results database yet. Run one with `recommender run experiments/quickstart.yaml` "
        "(or start the dashboard with `--db URL` to read another database)."
    )


def number(value: float | None, digits: int = 1, unit: str = "") -> str:
    if value is None:
        return "n/a"
    return f"{value:,.{digits}f}{(' ' + unit) if unit else ''}"


def metric_column(metric: Metric, label: str = "") -> ColumnConfig:
    """A metric as a number column: the catalog's dashboard label and decimals (the cells stay numbers, so a click on
    the header sorts by value)."""
    return st.column_config.NumberColumn(
        label or metric.frame, format="percent" if metric.style == "share" else f"%.{metric.digits}f"
    )


def seconds_column() -> ColumnConfig:
    """A duration in seconds, to a tenth as the CLI prints one."""
    return st.column_config.NumberColumn(format="%.1f")


def show_table(frame: pd.DataFrame, **options: Any) -> None:
    """st.dataframe across the page, a missing value shown as the CLI's '-' (never Python's None)."""
    st.dataframe(frame, placeholder=MISSING, width="stretch", **options)
