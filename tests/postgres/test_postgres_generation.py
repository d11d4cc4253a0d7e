"""A generative run's windows on a real PostgreSQL server: the generation column (migration 0009_genmetrics) keeps
each window's figures, and a decision under an SLO reads them back as SQLite's does."""

from __future__ import annotations

import pytest

from recommender.candidates import expand_candidates
from recommender.metrics.generation import window_generation
from recommender.metrics.headline import Measured
from recommender.metrics.levels import decide
from recommender.metrics.limits import Limits, SloTerm
from recommender.metrics.rules import Rules
from recommender.metrics.steady import measure_windows
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests.unit.test_generation_metrics import generative_log
from tests.unit.test_store import assert_migrated

pytestmark = pytest.mark.postgres


def test_a_generative_window_round_trips_and_decides_on_postgres(postgres_url):
    store = ResultStore.open(postgres_url)
    assert_migrated(store.engine)
    spec = ExperimentSpec.model_validate({"name": "llm"})
    candidate = store.save_candidate(store.save_experiment(spec), expand_candidates(spec)[0])
    log = generative_log([0.0, 0.1, 0.2], [10, 20, 30], [110, 120, 130], [11, 11, 21])
    run = store.start_run(candidate, "p", None)
    store.finish_run(run, "ok", windows=[(0, w) for w in measure_windows(log, [(0, 0.0, 1.0)], [1.0], Rules())])
    (stored,) = store.window_records(run)
    assert stored.generation == window_generation(log, 0.0, 1.0)
    decision = decide([stored], Measured(), Limits(slo=(SloTerm("ttft", "p50", 25.0),)))
    assert decision.figures.generation is not None and decision.figures.generation.value("goodput") == 2.0
