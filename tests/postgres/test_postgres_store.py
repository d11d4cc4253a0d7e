"""The store on a real PostgreSQL server: migrations, the migration lock, writers side by side, the lease."""

from __future__ import annotations

import socket

import pytest
from sqlalchemy import text

from recommender.candidates import expand_candidates
from recommender.errors import ExperimentLeased, StoreError
from recommender.spec import ExperimentSpec
from recommender.store.lease import Holder, Lease
from recommender.store.results import ResultStore
from tests import store_contention
from tests.unit.test_lease import ELSEWHERE, dead_pid
from tests.unit.test_store import assert_migrated

pytestmark = pytest.mark.postgres


def test_migrations_run_to_head_and_build_the_declared_schema(postgres_url):
    store = ResultStore.open(postgres_url)
    assert store.engine.dialect.name == "postgresql"
    assert_migrated(store.engine)
    ResultStore.open(postgres_url)  # opening a migrated database again changes nothing
    with store.engine.connect() as connection:
        assert connection.execute(text("SELECT count(*) FROM alembic_version")).scalar() == 1


def test_four_processes_opening_a_fresh_database_at_once_all_succeed(postgres_url):
    """The advisory lock serialises the migrations: without it, all four would create the tables at once."""
    outcomes = store_contention.open_at_once(postgres_url, count=4)
    assert [code for code, _, _ in outcomes] == [0, 0, 0, 0], [err for _, _, err in outcomes]
    assert_migrated(ResultStore.open(postgres_url).engine)


def test_processes_writing_runs_of_one_experiment_at_once_lose_no_row(postgres_url):
    store_contention.write_at_once(postgres_url, writers=4, runs=3)
    store = ResultStore.open(postgres_url)
    runs = list(store.runs("contended"))
    assert len(runs) == 12 and {r.status for r in runs} == {"ok"}
    assert len({r.candidate_id for r in runs}) == 4
    assert [len(store.series(r.id)) for r in runs] == [store_contention.SECONDS] * 12
    assert [len(store.phases(r.id)) for r in runs] == [1] * 12


def test_processes_racing_for_the_lease_one_takes_it(postgres_url):
    ResultStore.open(postgres_url)
    assert store_contention.race_for_lease(postgres_url, count=3) == ["refused", "refused", "took"]


def test_a_live_lease_refuses_and_a_dead_holder_is_taken_over(postgres_url):
    store = ResultStore.open(postgres_url)
    Lease(store.engine, "micro", holder=ELSEWHERE).acquire()
    with pytest.raises(ExperimentLeased) as info:
        store.lease("micro").acquire()
    assert "pid 4242 on host another-host" in info.value.message
    gone = Holder(socket.gethostname(), dead_pid(), 1_700_000_000.0)
    Lease(store.engine, "other", holder=gone).acquire()
    spec = ExperimentSpec.model_validate({"name": "other"})
    run_id = store.start_run(store.save_candidate(store.save_experiment(spec), expand_candidates(spec)[0]), "p", None)
    with store.lease("other"):
        assert [(r.status, f"pid {gone.pid}" in r.reason) for r in store.runs("other")] == [("interrupted", True)]
    with pytest.raises(StoreError):
        store.finish_run(run_id, "ok")
    assert store.lease_holder("micro") is not None and store.lease_holder("other") is None


def test_the_url_infra_compose_passes_opens_the_store(postgres_server):
    """infra/compose.yaml's database URL with this server's address: user, database and driver as compose sets them."""
    import yaml

    from tests.postgres.server import PASSWORD
    from tests.unit.test_infra_compose import COMPOSE, compose_database_url

    services = yaml.safe_load(COMPOSE.read_text())["services"]
    postgres_server.create_database(services["postgres"]["environment"]["POSTGRES_DB"])
    url = compose_database_url(services, PASSWORD).replace("@postgres:5432/", f"@127.0.0.1:{postgres_server.port}/")
    assert_migrated(ResultStore.open(url).engine)
