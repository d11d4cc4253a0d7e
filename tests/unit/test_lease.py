"""The lease per experiment on a real SQLite file: one job measures an experiment at a time; a dead holder is taken
over."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time

import pytest

from recommender.candidates import expand_candidates
from recommender.errors import ExperimentLeased, StoreError
from recommender.metrics.headline import Headline
from recommender.spec import ExperimentSpec
from recommender.store.lease import Holder, Lease
from recommender.store.results import ResultStore
from recommender.store.schema import LeaseRow
from tests import store_contention
from tests.integration.test_cli_run import MICRO, cli_env

ELSEWHERE = Holder("another-host", 4242, 1_700_000_000.0)


@pytest.fixture
def url(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


@pytest.fixture
def store(url) -> ResultStore:
    return ResultStore.open(url)


def lease_row(store: ResultStore, experiment: str = "micro") -> LeaseRow | None:
    from sqlalchemy.orm import Session

    with Session(store.engine) as session:
        return session.get(LeaseRow, experiment)


def running_run(store: ResultStore, name: str = "micro") -> int:
    """A run left `running` in experiment `name`, as a job measuring it has."""
    spec = ExperimentSpec.model_validate({"name": name})
    candidate_id = store.save_candidate(store.save_experiment(spec), expand_candidates(spec)[0])
    return store.start_run(candidate_id, "proto", None)


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_job_holds_the_lease_while_it_runs_and_releases_it(store):
    with Lease(store.engine, "micro") as lease:
        row = lease_row(store)
        assert row.holder == lease.holder.id == Holder.this_process().id
        assert (row.host, row.pid) == (socket.gethostname(), lease.holder.pid)
    assert lease_row(store) is None


def test_the_lease_is_released_when_the_job_fails(store):
    with pytest.raises(RuntimeError), Lease(store.engine, "micro"):
        raise RuntimeError("a bug in the job")
    assert lease_row(store) is None


def test_a_live_lease_refuses_naming_its_holder_and_since_when(store):
    Lease(store.engine, "micro", holder=ELSEWHERE).acquire()
    run_id = running_run(store)
    with pytest.raises(ExperimentLeased) as info, Lease(store.engine, "micro"):
        pass
    error = info.value
    assert error.exit_code == 2
    assert "another-host" in error.message and "pid 4242" in error.message
    assert f"since {lease_row(store).acquired_at:%Y-%m-%d %H:%M}" in error.message
    assert "--wait" in error.hint
    assert lease_row(store).holder == ELSEWHERE.id
    assert [r.status for r in store.runs("micro")] == ["running"], "a refused job must not touch the holder's runs"
    assert run_id


def test_a_dead_holder_on_this_host_is_taken_over_then_its_runs_are_interrupted(store):
    gone = Holder(socket.gethostname(), dead_pid(), 1_700_000_000.0)
    Lease(store.engine, "micro", holder=gone).acquire()
    running_run(store)
    with Lease(store.engine, "micro") as lease:
        assert lease_row(store).holder == lease.holder.id
        (run,) = store.runs("micro")
        assert run.status == "interrupted" and f"pid {gone.pid}" in run.reason


def test_a_reused_pid_is_not_the_holder(store):
    """Same host, the pid is alive, but it belongs to a process started after the holder: the holder is gone."""
    import os

    reused = Holder(socket.gethostname(), os.getpid(), Holder.this_process().started - 3600)
    Lease(store.engine, "micro", holder=reused).acquire()
    with Lease(store.engine, "micro") as lease:
        assert lease_row(store).holder == lease.holder.id


def test_an_expired_heartbeat_on_another_host_is_taken_over(store):
    Lease(store.engine, "micro", holder=ELSEWHERE, ttl_s=1.5).acquire()
    with pytest.raises(ExperimentLeased):
        Lease(store.engine, "micro").acquire()
    time.sleep(1.6)
    with Lease(store.engine, "micro") as lease:
        assert lease_row(store).holder == lease.holder.id


def test_the_heartbeat_keeps_a_lease_alive_past_its_ttl(store):
    with Lease(store.engine, "micro", holder=ELSEWHERE, ttl_s=1.0):
        first = lease_row(store).heartbeat_at
        time.sleep(2.0)  # two lease lifetimes: only renewals (every 0.25 s) keep it
        with pytest.raises(ExperimentLeased):
            Lease(store.engine, "micro").acquire()
        assert lease_row(store).heartbeat_at > first


def test_wait_takes_the_lease_once_the_holder_releases_it(store):
    holder = Lease(store.engine, "micro", holder=ELSEWHERE)
    holder.acquire()
    threading.Timer(0.5, holder.release).start()
    started = time.monotonic()
    with Lease(store.engine, "micro", wait=True, poll_s=0.1) as lease:
        assert lease_row(store).holder == lease.holder.id
    assert time.monotonic() - started >= 0.4


def test_releasing_never_removes_a_lease_taken_over_by_another_job(store):
    mine = Lease(store.engine, "micro", ttl_s=0.1)
    mine.acquire()
    time.sleep(0.2)
    Lease(store.engine, "micro", holder=ELSEWHERE).acquire()  # my heartbeat expired: taken over
    mine.release()
    assert lease_row(store).holder == ELSEWHERE.id


def test_finish_run_never_turns_an_interrupted_run_into_ok(store):
    run_id = running_run(store)
    Lease(store.engine, "micro").acquire()  # a job takes over and interrupts the run
    with pytest.raises(StoreError) as info:
        store.finish_run(run_id, "ok", headline=Headline(invocations_per_minute=1.0))
    assert "interrupted" in info.value.message
    (run,) = store.runs("micro")
    assert (run.status, run.headline) == ("interrupted", None)


def test_the_lease_is_keyed_by_experiment(store):
    with Lease(store.engine, "micro"), Lease(store.engine, "other"):
        assert lease_row(store, "micro") and lease_row(store, "other")


def test_two_processes_racing_for_a_lease_one_takes_it(url):
    ResultStore.open(url)
    assert store_contention.race_for_lease(url, count=3) == ["refused", "refused", "took"]


def test_a_second_run_of_a_leased_experiment_exits_2_naming_the_holder(tmp_path, store, url):
    (tmp_path / "micro.yaml").write_text(MICRO.format(first=2, second=2))
    Lease(store.engine, "micro", holder=ELSEWHERE).acquire()
    since = lease_row(store).acquired_at
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "run", "micro.yaml", "--db", url],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "another-host" in done.stderr and "pid 4242" in done.stderr and f"{since:%Y-%m-%d %H:%M}" in done.stderr
    assert "--wait" in done.stderr and "Traceback" not in done.stderr
    assert lease_row(store).holder == ELSEWHERE.id
    assert store.experiments() == []  # refused before writing anything


def read_until(stream, word: str) -> str:
    """The lines of `stream` up to the first one holding `word` (all of them if none does)."""
    seen = []
    for line in stream:
        seen.append(line)
        if word in line:
            break
    return "".join(seen)


REMOTE_DOWN = "name: micro\ntarget: {kind: remote, endpoint: 'http://127.0.0.1:9'}\n"


def test_run_wait_waits_for_the_holder_then_runs_and_releases(tmp_path, store, url):
    (tmp_path / "micro.yaml").write_text(REMOTE_DOWN)
    child = subprocess.Popen(
        [sys.executable, "-m", "recommender", "run", "micro.yaml", "--db", url, "--wait"],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    safety = threading.Timer(120, child.kill)
    safety.start()
    with Lease(store.engine, "micro", holder=ELSEWHERE, ttl_s=1.0):  # live: its heartbeat renews it meanwhile
        said = read_until(child.stdout, "waiting")
    out, err = child.communicate(timeout=120)
    safety.cancel()
    assert "waiting for the job measuring micro: pid 4242 on host another-host" in said + out, said + out + err
    assert child.returncode == 1 and "does not answer" in err  # it took the lease once released, then the target failed
    assert lease_row(store) is None  # released on the error path
