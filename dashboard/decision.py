"""The decision settings (importance, latency percentile and threshold, error limit, target load, price-as type) and
the recommendation they give, computed by recommender.decide.recommendation (the same code as `recommender rank` and
`report`). Every setting takes effect on the whole decision: the verdicts, MaxInvocations and ModelLatency are
re-decided from the stored windows under the chosen limits (nothing is measured).

    sidebar widgets -> Settings.limits (Limits.from_spec(file).override(sidebar values)) -> source.reviewed
        -> review.recommend_decided -> decide.verdicts.decide_results -> metrics.levels.decide (once per run),
        then the recommendation under those limits (the same review path as `recommender rank` and `report`)"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from recommender.candidates import CandidateResult
from recommender.decide.prices import load_catalog
from recommender.decide.ranking import IMPORTANCE_WEIGHTS
from recommender.decide.recommendation import Recommendation, recommend
from recommender.metrics.limits import Limits
from recommender.report import Report, build_report
from recommender.report.columns import only_for
from recommender.review import stored_spec, with_limits
from recommender.spec import CapacitySpec, ExperimentSpec, Objectives
from recommender.store.results import ExperimentInfo
from recommender.vocabulary import PERCENTILE_NAMES

LEVELS = tuple(IMPORTANCE_WEIGHTS)
PERSISTED = "setting:"  # session-state keys kept while other pages are shown


@dataclass(frozen=True)
class Settings:
    """The sidebar's decision settings: importance levels, target load and the limits (one `Limits`)."""

    cost: str
    latency: str
    throughput: str
    target_ipm: float
    limits: Limits

    def widgets(self) -> dict[str, str | float]:
        """Widget name -> value (the session-state keys' tails)."""
        return {
            "cost": self.cost,
            "latency": self.latency,
            "throughput": self.throughput,
            "percentile": self.limits.percentile,
            "threshold_ms": float(self.limits.threshold_ms),
            "target_ipm": float(self.target_ipm),
            "max_error_rate": float(self.limits.max_error_rate),
        }


def from_spec(spec: ExperimentSpec) -> Settings:
    o = spec.objectives
    return Settings(
        o.cost, o.latency, o.throughput, spec.capacity.target_invocations_per_minute, Limits.from_spec(spec)
    )


def apply(spec: ExperimentSpec, settings: Settings) -> ExperimentSpec:
    """The stored spec with every setting in place, the limits included (what the recommendation states)."""
    return with_limits(with_preferences(spec, settings), settings.limits)


def with_preferences(spec: ExperimentSpec, settings: Settings) -> ExperimentSpec:
    """The stored spec with the importance levels and the target load in place (validated sub-models, so bad values
    fail as they would in YAML); the limits travel on their own (Settings.limits)."""
    return spec.model_copy(
        update={
            "objectives": Objectives(cost=settings.cost, latency=settings.latency, throughput=settings.throughput),
            "capacity": CapacitySpec(
                target_invocations_per_minute=settings.target_ipm,
                autoscaling_headroom=spec.capacity.autoscaling_headroom,
            ),
        }
    )


def priced_as(spec: ExperimentSpec, instance_type: str) -> ExperimentSpec:
    return spec.model_copy(update={"target": spec.target.model_copy(update={"priced_as": instance_type})})


def controls(info: ExperimentInfo, spec: ExperimentSpec) -> Settings:
    """Sidebar widgets for the settings, defaulting to the experiment file's values (one set per experiment)."""
    default = from_spec(spec)
    key = f"{PERSISTED}{info.name}:"
    for name, value in default.widgets().items():
        st.session_state.setdefault(key + name, value)
    sidebar = st.sidebar
    sidebar.subheader("Decision settings")
    values = {
        name: sidebar.select_slider(f"{name.title()} importance", LEVELS, key=key + name)
        for name in ("cost", "latency", "throughput")
    }
    percentile = sidebar.selectbox("Latency percentile", PERCENTILE_NAMES, key=key + "percentile")
    threshold = sidebar.number_input("Latency threshold (ms)", min_value=0.001, key=key + "threshold_ms")
    errors = sidebar.number_input(
        "Max error rate (0.01 = 1 %)",
        min_value=0.0,
        max_value=1.0,
        step=0.005,
        format="%.3f",
        key=key + "max_error_rate",
    )
    target = sidebar.number_input(
        "Target load (invocations per minute)", min_value=1.0, step=1000.0, key=key + "target_ipm"
    )
    if sidebar.button("Reset to the experiment file", key=f"reset-settings:{info.name}"):
        for name in [k for k in st.session_state if str(k).startswith(key)]:
            del st.session_state[name]
        st.rerun()
    limits = default.limits.override(threshold_ms=threshold, percentile=percentile, max_error_rate=errors)
    return Settings(**values, target_ipm=target, limits=limits)


def chosen(info: ExperimentInfo) -> tuple[ExperimentSpec, Settings, ExperimentSpec]:
    """The stored experiment file, the sidebar's settings (drawn here) and the file with its preferences in place
    (the limits travel apart, in Settings.limits)."""
    spec = spec_of(info)
    settings = controls(info, spec)
    return spec, settings, with_preferences(spec, settings)


def keep_settings() -> None:
    """Re-store the settings widgets' values so they survive pages that do not draw them."""
    for name in [k for k in st.session_state if str(k).startswith(PERSISTED)]:
        st.session_state[name] = st.session_state[name]


def spec_of(info: ExperimentInfo) -> ExperimentSpec:
    return stored_spec(info.name, info.spec)


def recommendation(spec: ExperimentSpec, results: list[CandidateResult], settings: Settings) -> Recommendation:
    return recommend(results, apply(spec, settings))


def report(rec: Recommendation) -> Report:
    return build_report(rec)


def rows_frame(report_: Report) -> pd.DataFrame:
    """Ranked and excluded candidates from the report's row model, ready for st.dataframe."""
    rows = []
    for row in report_.all_rows:
        record = dataclasses.asdict(row)
        record["excluded_reasons"] = "; ".join(row.excluded_reasons)
        record["notes"] = ", ".join(row.flags)
        record["interval"] = row.interval_text
        record |= {m.name: m.read(row) for m in GENERATIVE_FIGURES}  # a generative row's figures by catalog name
        rows.append(record)
    frame = pd.DataFrame(rows).drop(columns=["generation"], errors="ignore")
    return frame.drop(columns=["recommended", "tied", "pareto", "unstable", "ipm_low", "ipm_high"], errors="ignore")


GENERATIVE_FIGURES = tuple(m for m in only_for("generative") if m.figure)


def catalog_types() -> list[str]:
    return sorted(load_catalog().instances)
