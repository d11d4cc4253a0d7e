"""Store round trip on a real SQLite file, migrated by Alembic."""

import numpy as np
import pytest
from sqlalchemy import inspect

from recommender.candidates import expand_candidates
from recommender.errors import StoreError
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.records import RequestLog
from recommender.metrics.summary import per_second_series, summarize_phases
from recommender.spec import ExperimentSpec
from recommender.store.database import explain, resolve_url
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
    return RequestLog(
        t, np.full(len(t), 5000, dtype=np.int64), np.ones(len(t), dtype=bool), np.ones(len(t), dtype=np.int32)
    )


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
    headline = Headline(
        invocations_per_minute=6000.0,
        latency_ms={"p50": 5.0, "p90": 9.0, "p95": 12.0, "p99": None},
        ipm_interval=Interval(6000.0, 5900.0, 6100.0, 3),
        stable=True,
        notes=("a note",),
    )
    store.finish_run(run_id, "ok", headline=headline, phases=phases, series=series)

    (result, *others) = store.results("roundtrip")
    assert (result.name, result.status, result.headline) == (candidate.name, "ok", headline)
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


@pytest.mark.parametrize("newest", ["failed", "interrupted"])
def test_an_older_ok_run_is_not_final_once_a_newer_run_failed(store, spec, newest):
    """A `--fresh` job stopped mid-candidate: its resume measures that candidate again, so the stored status is ok."""
    experiment_id = store.save_experiment(spec)
    candidate_id = store.save_candidate(experiment_id, expand_candidates(spec)[0])
    store.finish_run(store.start_run(candidate_id, "p", None), "ok")
    assert store.final_run(candidate_id, "p") is not None
    store.finish_run(store.start_run(candidate_id, "p", None), newest, reason="interrupted by SIGTERM")
    assert store.final_run(candidate_id, "p") is None


def test_unknown_experiment_lists_known_ones(store, spec):
    store.save_experiment(spec)
    with pytest.raises(StoreError) as info:
        store.experiment("nope")
    assert "roundtrip" in info.value.hint


def test_unreachable_database_is_a_store_error_with_hint():
    with pytest.raises(StoreError) as info:
        ResultStore.open("postgresql+psycopg://nobody@127.0.0.1:1/none")
    assert "--db" in info.value.hint


def test_a_sqlite_file_in_a_missing_folder_is_said_so_and_nothing_is_made(tmp_path):
    missing = tmp_path / "no" / "such"
    with pytest.raises(StoreError) as info:
        ResultStore.open(f"sqlite:///{missing / 'results.db'}")
    assert f"the folder {missing} does not exist" in str(info.value)
    assert f"mkdir -p {missing}" in info.value.hint
    assert not (tmp_path / "no").exists()
    with pytest.raises(StoreError, match="does not exist"):  # SQLite's URI form too
        ResultStore.open(f"sqlite:///file:{missing / 'results.db'}?mode=ro&uri=true")


def test_processes_opening_a_new_database_at_once_all_succeed(tmp_path):
    """A run and a dashboard (or a test polling the store) may create the schema at the same moment."""
    outcomes = store_contention.open_at_once(f"sqlite:///{tmp_path / 'fresh.db'}")
    assert [code for code, _, _ in outcomes] == [0, 0, 0, 0], [err for _, _, err in outcomes]


def test_spend_adds_up_and_survives_reopening(tmp_path, spec):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    first = ResultStore.open(url)
    assert first.spent("roundtrip") == 0.0  # not stored yet
    first.save_experiment(spec)
    first.add_spend("roundtrip", 0.25)
    first.add_spend("roundtrip", 0.5)
    first.engine.dispose()
    again = ResultStore.open(url)
    assert again.spent("roundtrip") == pytest.approx(0.75)
    again.save_experiment(spec)  # a resumed run keeps the total
    assert again.spent("roundtrip") == pytest.approx(0.75)
    with pytest.raises(ValueError):
        again.add_spend("roundtrip", -1.0)


def test_migration_0003_adds_spend_to_an_existing_database(tmp_path, spec):
    """A database created at revision 0002 (before spend existed) keeps its experiments, each at $0 spent."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from recommender.store.database import MIGRATIONS

    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
        connection.exec_driver_sql(
            "INSERT INTO experiments (name, spec, status, created_at, updated_at) "
            "VALUES ('old', '{}', 'done', '2025-01-01', '2025-01-01')"
        )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'old.db'}")
    assert store.spent("old") == 0.0
    store.add_spend("old", 1.5)
    assert store.spent("old") == 1.5


def test_a_skip_for_budget_is_not_final_other_skips_are(store, spec):
    experiment_id = store.save_experiment(spec)
    first, second, *_ = (store.save_candidate(experiment_id, c) for c in expand_candidates(spec))
    store.finish_run(
        store.start_run(first, "p", None),
        "skipped",
        reason="budget: $1.00 of the $1.00 budget spent",
        budget_skipped=True,
    )
    store.finish_run(store.start_run(second, "p", None), "skipped", reason="TensorRT needs an NVIDIA GPU")
    assert store.final_run(first, "p") is None  # measured once the budget is raised
    assert store.final_run(second, "p").reason == "TensorRT needs an NVIDIA GPU"


def test_migration_0007_flags_the_budget_skips_stored_before_it(tmp_path, spec):
    """A database at revision 0006 (budget skips told apart by their reason's prefix) gets the flag back-filled."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from recommender.store.database import MIGRATIONS

    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0006")
        connection.exec_driver_sql(
            "INSERT INTO experiments (id, name, spec, status, created_at, updated_at, spent_usd) "
            "VALUES (1, 'old', '{}', 'done', '2025-01-01', '2025-01-01', 0)"
        )
        connection.exec_driver_sql(
            "INSERT INTO candidates (id, experiment_id, key, name, config) VALUES "
            "(1, 1, 'a', 'a', '{}'), (2, 1, 'b', 'b', '{}')"
        )
        connection.exec_driver_sql(
            "INSERT INTO runs (candidate_id, protocol_key, status, reason, started_at) VALUES "
            "(1, 'p', 'skipped', 'budget: $1.00 of the $1.00 budget spent', '2025-01-01'), "
            "(2, 'p', 'skipped', 'TensorRT needs an NVIDIA GPU', '2025-01-01')"
        )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'old.db'}")
    assert_migrated(store.engine)
    assert [(r.key, r.budget_skipped) for r in store.results("old", "p")] == [("a", True), ("b", False)]
    assert store.final_run(1, "p") is None
    assert store.final_run(2, "p").reason == "TensorRT needs an NVIDIA GPU"


def test_migrating_an_old_database_keeps_every_run_s_windows(tmp_path):
    """Migrations add columns in place: a recreated `runs` table would cascade-delete the windows (foreign keys on)."""
    import shutil
    import sqlite3
    from pathlib import Path

    copy = tmp_path / "seed.db"
    shutil.copy(Path(__file__).parents[1] / "data" / "dashboard_seed.db", copy)

    def count() -> int:
        with sqlite3.connect(copy) as connection:
            return connection.execute("SELECT count(*) FROM windows").fetchone()[0]

    before = count()
    assert_migrated(ResultStore.open(f"sqlite:///{copy}").engine)
    assert count() == before > 0


def test_the_url_can_come_from_a_file_and_explicit_urls_win(tmp_path, monkeypatch):
    (tmp_path / "db-url").write_text(f"  sqlite:///{tmp_path / 'from-file.db'}\n")
    monkeypatch.setenv("RECOMMENDER_DB_URL_FILE", str(tmp_path / "db-url"))
    monkeypatch.delenv("RECOMMENDER_DB_URL", raising=False)
    assert resolve_url(None) == f"sqlite:///{tmp_path / 'from-file.db'}"
    assert ResultStore.open().engine.url.database == str(tmp_path / "from-file.db")
    monkeypatch.setenv("RECOMMENDER_DB_URL", "sqlite:///from-env.db")
    assert resolve_url(None) == "sqlite:///from-env.db"
    assert resolve_url("sqlite:///from-flag.db") == "sqlite:///from-flag.db"


def test_processes_writing_runs_of_one_experiment_at_once_lose_no_row(tmp_path):
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store_contention.write_at_once(url, writers=4, runs=3)
    store = ResultStore.open(url)
    runs = list(store.runs("contended"))
    assert len(runs) == 12 and {r.status for r in runs} == {"ok"}
    assert [len(store.series(r.id)) for r in runs] == [store_contention.SECONDS] * 12
    assert [len(store.phases(r.id)) for r in runs] == [1] * 12


@pytest.mark.parametrize(
    ("driver", "reason"),
    [
        ("database is locked", "the database is locked: another connection held a write lock"),
        ("attempt to write a readonly database", "the database is read-only"),
        ("database or disk is full", "the disk holding the database is full"),
        ("no such table: runs", "no such table: runs"),
    ],
)
def test_database_failures_are_explained_in_one_line_without_the_sql(driver, reason):
    import sqlite3

    from sqlalchemy.exc import OperationalError

    failure = OperationalError(
        "DELETE FROM experiment_leases WHERE holder = ?", ("a-parameter",), sqlite3.OperationalError(driver)
    )
    text, hint = explain(failure)
    assert text.startswith(reason) and "\n" not in text and hint
    assert "DELETE" not in text and "a-parameter" not in text and "sqlalche.me" not in text


def test_a_run_stores_its_payload_and_runs_before_migration_0008_read_none(tmp_path, spec):
    """The payload a run was sent (fingerprint, source, token lengths) is stored with it and read back; a database
    at revision 0007 is migrated in place, its runs reading None ("not recorded")."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from recommender.metrics.payload_lengths import PayloadLengths, payload_lengths
    from recommender.store.database import MIGRATIONS

    engine = create_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0007")
        connection.exec_driver_sql(
            "INSERT INTO experiments (id, name, spec, status, created_at, updated_at, spent_usd) "
            "VALUES (1, 'old', '{}', 'done', '2025-01-01', '2025-01-01', 0)"
        )
        connection.exec_driver_sql(
            "INSERT INTO candidates (id, experiment_id, key, name, config) VALUES (1, 1, 'a', 'a', '{}')"
        )
        connection.exec_driver_sql(
            "INSERT INTO runs (candidate_id, protocol_key, status, started_at) VALUES (1, 'p', 'ok', '2025-01-01')"
        )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'old.db'}")
    assert_migrated(store.engine)
    assert [r.payload for r in store.results("old", "p")] == [None]
    sent = payload_lengths("f" * 16, "queries.jsonl", [3, 5, 5, 40])
    experiment_id = store.save_experiment(spec)
    candidate = store.save_candidate(experiment_id, expand_candidates(spec)[0])
    store.finish_run(store.start_run(candidate, "q", None, payload=sent.to_dict()), "ok")
    (result,) = [r for r in store.results(spec.name, "q") if r.run_id is not None]
    assert PayloadLengths.from_dict(result.payload) == sent
