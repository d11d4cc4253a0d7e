"""PostgreSQL on E shared by the hosts: an outage mid-run loses no row; the lease names its holder from another
host, and a holder killed with SIGKILL is taken over from another host once its heartbeat is old."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.store.lease import LEASE_TTL_S
from recommender.store.results import ResultStore
from tests.multihost.conftest import Server, cli_env, recommender
from tests.multihost.lab import Lab, address
from tests.multihost.test_links_cut import once_loaded
from tests.postgres.server import INSTALL, PostgresServer, find_binaries

OUTAGE_S = 20


@pytest.fixture(scope="module")
def postgres(lab: Lab) -> Iterator[PostgresServer]:
    binaries = find_binaries()
    if binaries is None:
        pytest.skip(f"PostgreSQL server binaries (initdb, pg_ctl) not found: {INSTALL}")
    pytest.importorskip("psycopg", reason='the psycopg driver is missing: pip install -e ".[postgres]"')
    server = PostgresServer.create(binaries, address("e"), lambda command: lab.command("e", command), port=5432)
    try:
        server.start()
        yield server
    finally:
        server.stop()


def write_experiment(workdir: Path, name: str, endpoint: str, seconds: int) -> Path:
    path = workdir / f"{name}.yaml"
    path.write_text(
        f"name: {name}\ncorrectness: off\nvariants: {{dynamic_batching: [false, true]}}\n"
        f"target: {{kind: remote, endpoint: '{endpoint}'}}\n"
        "traffic: {warmup_seconds: 1, window_seconds: 2, "
        f"phases: [{{initial_users: 2, duration_seconds: {seconds}}}]}}\n"
    )
    return path


def run_on(lab: Lab, host: str, workdir: Path, file: Path, url: str) -> subprocess.Popen:
    argv = recommender("run", file.name, "--db", url)
    return lab.popen(
        host, argv, cwd=workdir, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_the_database_stopped_mid_run_loses_no_row(
    lab: Lab, d1: Server, postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.create_database("outage")
    file = write_experiment(tmp_path, "mh-outage", d1.endpoint, seconds=30)
    job = run_on(lab, "a", tmp_path, file, url)
    once_loaded(d1)
    postgres.pause()
    time.sleep(OUTAGE_S)
    postgres.resume()
    output, _ = job.communicate(timeout=300)
    print(f"first run after a {OUTAGE_S} s database outage: exit {job.returncode}")  # shown with -s / in the log
    store = ResultStore.open(url)
    if job.returncode != 0:  # the alternative the product may take: the candidate's write failed, stated in one line
        assert "database" in output.lower() and "Traceback" not in output, output[-3000:]
        again = run_on(lab, "a", tmp_path, file, url)
        output, _ = again.communicate(timeout=300)
        assert again.returncode == 0, output[-3000:]
    results = store.results("mh-outage")
    assert [r.status for r in results] == ["ok", "ok"], [(r.status, r.reason) for r in results]
    for result in results:  # every window of every measured run stored, once
        keys = [(w.repeat, w.phase_index, w.index) for w in store.window_records(result.run_id)]
        assert len(keys) == len(set(keys)) == 14, keys


def test_the_lease_names_its_holder_on_another_host_and_is_taken_over_after_a_kill(
    lab: Lab, d1: Server, postgres: PostgresServer, tmp_path: Path
) -> None:
    url = postgres.create_database("lease")
    file = write_experiment(tmp_path, "mh-lease", d1.endpoint, seconds=20)
    holder = run_on(lab, "a", tmp_path, file, url)
    once_loaded(d1)
    refused = lab.run("b", recommender("run", file.name, "--db", url), timeout=120, cwd=tmp_path, env=cli_env())
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "on host rmh-a" in refused.stdout + refused.stderr  # the holder, named by its host
    killed_at = time.monotonic()
    holder.send_signal(signal.SIGKILL)  # `ip netns exec` execs: this is the job itself
    holder.wait(timeout=30)
    taker = lab.run("b", recommender("run", file.name, "--db", url, "--wait"), timeout=400, cwd=tmp_path, env=cli_env())
    assert taker.returncode == 0, taker.stdout[-3000:] + taker.stderr[-3000:]
    assert time.monotonic() - killed_at >= LEASE_TTL_S * 0.9  # from another host: only after the heartbeat is old
    results = ResultStore.open(url).results("mh-lease")
    assert [r.status for r in results] == ["ok", "ok"], [(r.status, r.reason) for r in results]
