"""The experiment the sidebar selected, and its results, with the notices for the cases that have nothing to show."""

from __future__ import annotations

from dataclasses import dataclass

import streamlit as st

from dashboard import decision, source
from dashboard.text import escape, no_experiments, show_error
from recommender.candidates import CandidateResult, RunStatus
from recommender.decide.recommendation import Recommendation
from recommender.errors import RecommenderError
from recommender.metrics.limits import Limits
from recommender.metrics.rules import WindowRules
from recommender.spec import ExperimentSpec
from recommender.store.results import ExperimentInfo, ExperimentStatus


def selected() -> ExperimentInfo | None:
    """The selected experiment, or None after telling the user why there is none."""
    name = st.session_state.get("experiment")
    if not name:
        no_experiments()
        return None
    try:
        return source.experiment(name)
    except RecommenderError as error:
        show_error(error)
        return None


def in_view() -> ExperimentInfo | None:
    """The selected experiment with its running / interrupted notice shown; None after telling why there is none."""
    info = selected()
    if info is not None:
        running_notice(info)
    return info


@dataclass(frozen=True)
class DecisionView:
    """What the decision pages (Ranking, Compare, Cost, Report) start from: the stored results decided under the
    sidebar's settings."""

    info: ExperimentInfo
    spec: ExperimentSpec
    settings: decision.Settings
    results: list[CandidateResult]
    recommendation: Recommendation

    @property
    def limits(self) -> Limits:
        """The limits the results were decided under (the sidebar's)."""
        return self.settings.limits

    @property
    def rules(self) -> WindowRules:
        """The window rules the results were measured and decided with (the stored experiment file's)."""
        return WindowRules.from_spec(self.spec)


def decision_in_view() -> DecisionView | None:
    """The selected experiment, the sidebar's decision settings and the recommendation they give; None after
    showing why there is none (no experiment, or a stored experiment that no longer validates)."""
    info = in_view()
    if info is None:
        return None
    try:
        spec, settings, preferred = decision.chosen(info)
        rec, results = source.reviewed(info.name, preferred, settings.limits)  # decided under the sidebar's limits
        return DecisionView(info, spec, settings, results, rec)
    except RecommenderError as error:
        show_error(error)
        return None


def running_notice(info: ExperimentInfo) -> None:
    if info.status == ExperimentStatus.RUNNING:
        st.info(
            f"{escape(info.name)} is still running: the figures below are what is stored so far. "
            "Rerun the page (R) to refresh.",
            icon="⏳",
        )
    elif info.status == ExperimentStatus.INTERRUPTED:
        st.warning(f"{escape(info.name)} was interrupted; run the same command again to resume it.")


def measured(results: list[CandidateResult]) -> list[CandidateResult]:
    """Candidates with a finished ok run (the only ones with figures to chart)."""
    return [r for r in results if r.status == RunStatus.OK and r.run_id is not None and r.headline]


def nothing_measured(info: ExperimentInfo, results: list[CandidateResult]) -> None:
    if not results:
        st.info(f"{escape(info.name)} has no candidates stored yet.")
        return
    st.info(
        f"None of the {len(results)} candidates of {escape(info.name)} has a successful measurement yet "
        "(see the Experiments page for each one's status and reason)."
    )
