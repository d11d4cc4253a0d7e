"""Streamlit entry script: the experiment picker, the decision settings and the page navigation.

Run through `recommender dashboard`; the pages live in dashboard/views/ and read the selection from
st.session_state ("experiment").
"""

from __future__ import annotations

import streamlit as st

from dashboard import decision, source
from dashboard.text import escape, show_error
from recommender.errors import RecommenderError

PAGES = (
    ("views/experiments.py", "Experiments", ":material/science:"),
    ("views/ranking.py", "Ranking", ":material/leaderboard:"),
    ("views/compare.py", "Compare", ":material/compare_arrows:"),
    ("views/curves.py", "Curves", ":material/show_chart:"),
    ("views/cost.py", "Cost", ":material/payments:"),
    ("views/history.py", "History", ":material/history:"),
    ("views/search.py", "Search", ":material/route:"),
    ("views/report.py", "Report", ":material/download:"),
)


def database_open() -> bool:
    """Open the results database once; on failure say why (message and hint), never a traceback."""
    try:
        source.store()
    except RecommenderError as error:
        st.title("recommender")
        show_error(error)
        st.caption(f"Database: {escape(_redacted(source.database_url()))}")
        return False
    return True


def pick_experiment() -> None:
    """Sidebar select box of the stored experiments (newest first); sets st.session_state.experiment."""
    names = [info.name for info in source.experiments()]
    if not names:
        st.session_state["experiment"] = None
        st.sidebar.caption("No experiments stored yet.")
        return
    st.sidebar.selectbox("Experiment", names, key="experiment")
    st.sidebar.caption(f"Database: {escape(_redacted(source.database_url()))}")


def _redacted(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def main() -> None:
    st.set_page_config(page_title="recommender", page_icon=":material/leaderboard:", layout="wide")
    if not database_open():
        return
    decision.keep_settings()
    pick_experiment()
    pages = [
        st.Page(path, title=title, icon=icon, default=index == 0) for index, (path, title, icon) in enumerate(PAGES)
    ]
    st.navigation(pages).run()


main()
