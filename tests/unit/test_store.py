"""Store round trip on a real SQLite file, migrated by Alembic."""

import numpy as np
import pytest
from sqlalchemy import inspect

from recommender.errors import StoreError
from recommender.records import RequestLog
from recommender.metrics.summary import per_second_series, summarize_phases
from recommender.candidates import expand_candidates
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests import store_contention


@pytest.fixture
def store(tmp_path):
    return ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")


@pytest.fixture
def spec():
    return ExperimentSpec.model_validate({"name": "roundtrip", "variants": {"instance_counts": [1, 2]}})


def a_log() -> RequestLog:
    t = np.arange(0, 4, 0.01)
    return RequestLog(t, np.full(len(t), 5000, dtype=np.int64), np.ones(len(t), dtype=bool), np.ones(len(t), dtype=np.int32))


def assert_migrated(engine) -> None:
    """Every table exists, the database is at the newest migration, and the migrations build what schema.py declares."""
    from alembic.autogenerate import compare_metadata
    from alembic.migration import MigrationContext
    from alembic.script import ScriptDirectory

    from recommender.store.database import MIGRATIONS
    from recommender.store.schema import Base

    tables = set(inspect(engine).get_table_names())
    assert set(Base.metadata.tables) | {"alembic_version"} == tables
    assert {"experiments", "candidates", "runs", "phase_summaries", "series", "windows", "experiment_leases"} <= tables
    with engine.connect() as connection:
        context = MigrationContext.configure(connection)
        assert context.get_current_revision() == ScriptDirectory(str(MIGRATIONS)).get_current_head()
        assert compare_metadata(context, Base.metadata) == []


def test_migration_creates_every_table(store):
    assert_migrated(store.engine)


def test_run_round_trip_with_phases_and_series(store, spec):
    experiment_id = store.save_experiment(spec)
    candidate, *rest = expand_candidates(spec)
    candidate_id = store.save_candidate(experiment_id, candidate)
    for other in rest:
        store.save_candidate(experiment_id, other)
    assert store.save_candidate(experiment_id, candidate) == candidate_id  # idempotent
    run_id = store.start_run(candidate_id, "proto", "/tmp/run")
    phases = summarize_phases(a_log(), [(0, 4)], warmup_s=1)
    series = per_second_series(a_log(), 4)
    store.finish_run(run_id, "ok", headline={"invocations_per_minute": 6000.0}, phases=phases, series=series)

    (result, *others) = store.results("roundtrip")
    assert (result.name, result.status, result.headline) == (candidate.name, "ok", {"invocations_per_minute": 6000.0})
    assert [o.status for o in others] == ["pending"] * len(rest)
    assert [round(p.invocations_per_minute) for p in store.phases(run_id)] == [6000]
    assert [s.ok for s in store.series(run_id)] == [100, 100, 100, 100]
    assert store.final_run(candidate_id, "proto").id == run_id
    assert store.final_run(candidate_id, "other-protocol") is None


def test_failed_runs_are_not_final_and_running_runs_become_interrupted(store, spec):
    experiment_id = store.save_experiment(spec)
    candidate_id = store.save_candidate(experiment_id, expand_candidates(spec)[0])
    failed = store.start_run(candidate_id, "p", None)
    store.finish_run(failed, "failed", reason="model did not load")
    assert store.final_run(candidate_id, "p") is None
    store.start_run(candidate_id, "p", None)  # the job dies here
    store.save_experiment(spec)  # writing the experiment row alone leaves its runs as they are
    assert [r.status for r in store.runs("roundtrip")] == ["failed", "running"]
    with store.lease("roundtrip"):  # the next job takes the lease: nobody else is measuring
        assert [r.status for r in store.runs("roundtrip")] == ["failed", "interrupted"]


def test_unknown_experiment_lists_known_ones(store, spec):
    store.save_experiment(spec)
    with pytest.raises(StoreError) as info:
        store.experiment("nope")
    assert "roundtrip" in info.value.hint


def test_unreachable_database_is_a_store_error_with_hint():
    with pytest.raises(StoreError) as info:
        ResultStore.open("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert "--db" in info.value.hint


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    """A run and a dashboard (or a test polling the store) may create the schema at the same moment."""
    outcomes = store_contention.open_at_once(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert [code for code, _, _ in outcomes] == [0, 0, 0, 0], [err for _, _, err in outcomes]


def test_processes_writing_runs_of_one_experiment_at_once_lose_no_row(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store_contention.write_at_once(url, writers=4, runs=3)
    store = ResultStore.open(url)
    runs = list(store.runs("contended"))
    assert len(runs) == 12 and {r.status for r in runs} == {"ok"}
    assert [len(store.series(r.id)) for r in runs] == [store_contention.SECONDS] * 12
    assert [len(store.phases(r.id)) for r in runs] == [1] * 12
