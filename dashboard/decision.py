"""The decision settings (importance, latency percentile and threshold, error limit, target load, price-as type) and
the recommendation they give, computed by recommender.decide.recommendation (the same code as `recommender rank` and
`report`). Every setting takes effect on the whole decision: the verdicts, MaxInvocations and ModelLatency are
re-decided from the stored windows under the chosen limits (nothing is measured)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from recommender.candidates import CandidateResult
from recommender.decide.prices import load_catalog
from recommender.decide.ranking import IMPORTANCE_WEIGHTS
from recommender.decide.recommendation import Recommendation, recommend
from recommender.errors import SpecError
from recommender.report import Report, build_report
from recommender.review import stored_spec
from recommender.spec import CapacitySpec, ExperimentSpec, LatencyThreshold, Objectives
from recommender.store.results import ExperimentInfo
from recommender.vocabulary import PERCENTILE_NAMES

LEVELS = tuple(IMPORTANCE_WEIGHTS)
_NUMBERS = ("threshold_ms", "target_ipm", "max_error_rate")
PERSISTED = "setting:"  # session-state keys kept while other pages are shown


@dataclass(frozen=True)
class Settings:
    cost: str
    latency: str
    throughput: str
    percentile: str
    threshold_ms: float
    target_ipm: float
    max_error_rate: float = 0.01


def from_spec(spec: ExperimentSpec) -> Settings:
    o, t = spec.objectives, spec.latency_threshold
    return Settings(
        o.cost,
        o.latency,
        o.throughput,
        t.percentile,
        t.ms,
        spec.capacity.target_invocations_per_minute,
        spec.max_error_rate,
    )


def apply(spec: ExperimentSpec, settings: Settings) -> ExperimentSpec:
    """The stored spec with the settings in place (validated sub-models, so bad values fail as they would in YAML)."""
    return spec.model_copy(
        update={
            "objectives": Objectives(cost=settings.cost, latency=settings.latency, throughput=settings.throughput),
            "latency_threshold": LatencyThreshold(percentile=settings.percentile, ms=settings.threshold_ms),
            "capacity": CapacitySpec(
                target_invocations_per_minute=settings.target_ipm,
                autoscaling_headroom=spec.capacity.autoscaling_headroom,
            ),
            "max_error_rate": _error_rate(settings.max_error_rate),
        }
    )


def _error_rate(value: float) -> float:
    if not 0 <= value <= 1:
        raise SpecError(f"max error rate must be between 0 and 1, got {value!r}")
    return float(value)


def priced_as(spec: ExperimentSpec, instance_type: str) -> ExperimentSpec:
    return spec.model_copy(update={"target": spec.target.model_copy(update={"priced_as": instance_type})})


def controls(info: ExperimentInfo, spec: ExperimentSpec) -> Settings:
    """Sidebar widgets for the settings, defaulting to the experiment file's values (one set per experiment)."""
    default = from_spec(spec)
    key = f"{PERSISTED}{info.name}:"
    for name, value in dataclasses.asdict(default).items():
        st.session_state.setdefault(key + name, float(value) if name in _NUMBERS else value)
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
    return Settings(**values, percentile=percentile, threshold_ms=threshold, target_ipm=target, max_error_rate=errors)


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
        rows.append(record)
    frame = pd.DataFrame(rows)
    return frame.drop(columns=["recommended", "tied", "pareto", "unstable", "ipm_low", "ipm_high"], errors="ignore")


def catalog_types() -> list[str]:
    return sorted(load_catalog().instances)
