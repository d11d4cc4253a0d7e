"""Where the pages get their data: recommender's ResultStore (URL from RECOMMENDER_DB_URL, set by the CLI)."""

from __future__ import annotations

import functools
import os
from typing import Any

import streamlit as st

from recommender.candidates import CandidateResult
from recommender.decide.recommendation import Recommendation
from recommender.errors import StoreError
from recommender.metrics.levels import WindowRecord
from recommender.metrics.limits import Limits
from recommender.review import decided_from_store, recommend_decided, stored_spec
from recommender.spec import ExperimentSpec
from recommender.store.database import resolve_url
from recommender.store.results import ExperimentInfo, ResultStore

DB_ENV = "RECOMMENDER_DB_URL"


def database_url() -> str:
    return resolve_url(os.environ.get(DB_ENV))


@st.cache_resource(show_spinner=False)
def _store(url: str) -> ResultStore:
    return ResultStore.open(url, existing=True)  # a missing SQLite file is said on the page, not made empty


def store() -> ResultStore:
    """The results store for this dashboard process (opened once per URL)."""
    return _store(database_url())


def experiments() -> list[ExperimentInfo]:
    return store().experiments()


def experiment(name: str) -> ExperimentInfo:
    return store().experiment(name)


def results(name: str) -> list[CandidateResult]:
    """The experiment's results under its current measurement protocol, decided under its experiment file's limits
    (as stored; a file that no longer validates leaves the figures as measured)."""
    info = experiment(name)
    try:
        spec = stored_spec(info.name, info.spec)
    except StoreError:
        return store().results(name, store().current_protocols(name) or "")
    return decided(name, spec)


def decided(name: str, spec: ExperimentSpec) -> list[CandidateResult]:
    """The experiment's current-protocol results decided under `spec`'s limits (re-decided, never re-measured)."""
    url = database_url()
    return decided_from_store(store(), name, spec, windows_of=lambda run_id: _window_records(url, run_id))


def reviewed(name: str, spec: ExperimentSpec, limits: Limits) -> tuple[Recommendation, list[CandidateResult]]:
    """The experiment's current-protocol results decided under `limits` (with `spec`'s window rules) and the
    recommendation they give under `spec` with those limits (review.recommend_decided; windows read through the
    cache)."""
    windows_of = functools.partial(_window_records, database_url())
    rec, _, results = recommend_decided(store(), name, spec, limits, windows_of=windows_of)
    return rec, results


@st.cache_data(show_spinner=False, max_entries=4096)
def _window_records(url: str, run_id: int) -> list[WindowRecord]:
    """A finished run's windows (they never change once the run is finished: safe to keep)."""
    return _store(url).window_records(run_id)


def window_records(run_id: int) -> list[WindowRecord]:
    """A finished run's windows as the decision reads them."""
    return _window_records(database_url(), run_id)


def history(name: str) -> list[CandidateResult]:
    """Every finished run of the experiment, every protocol, oldest first (as stored)."""
    return store().history(name)


def phase_rows(run_id: int) -> list[dict[str, Any]]:
    """The run's phase summaries as plain records (column name -> value)."""
    return [_columns(row) for row in store().phases(run_id)]


def second_rows(run_id: int) -> list[dict[str, Any]]:
    """The run's per-second series as plain records."""
    return [_columns(row) for row in store().series(run_id)]


def window_rows(run_id: int) -> list[dict[str, Any]]:
    """The run's steady-state windows (start_s, end_s, stable, ...) where the store keeps them (schema 0002 on)."""
    read = getattr(store(), "windows", None)  # absent before the measurement store lands
    return [_columns(row) for row in read(run_id)] if read is not None else []


def _columns(row: Any) -> dict[str, Any]:
    return {column.key: getattr(row, column.key) for column in row.__table__.columns}
