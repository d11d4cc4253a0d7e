"""Showing user strings safely (experiment, model and candidate names, failure reasons) and the common notices."""

from __future__ import annotations

import re

import streamlit as st

from recommender.errors import RecommenderError

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
