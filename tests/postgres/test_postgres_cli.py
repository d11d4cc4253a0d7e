"""`recommender run` on a real PostgreSQL server (real export, tritonserver, Locust), then rank, report and the
dashboard read the stored rows back; a second run of the same experiment meanwhile refuses (the lease)."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from recommender.store.results import ResultStore
from tests.integration.test_cli_run import MICRO, cli_env, recommender, servers_under
from tests.unit.test_dashboard_pages import assert_clean, charts, open_page, texts

pytestmark = [pytest.mark.postgres, pytest.mark.integration, pytest.mark.slow]

CANDIDATE = "pt-nodb-ig1-mbs4"


def wait_for_lease(store: ResultStore, job: subprocess.Popen, timeout_s: float = 120) -> str:
    deadline = time.monotonic() + timeout_s
    while (holder := store.lease_holder("micro")) is None and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert holder is not None, "the first run never took the experiment's lease"
    return holder


@dataclass
class Measured:
    url: str
    workdir: Path
    first: subprocess.CompletedProcess
    first_pid: int
    second: subprocess.CompletedProcess  # started while the first held the lease


@pytest.fixture(scope="module")
def measured(postgres_server, tmp_path_factory):
    """One candidate measured for 2 x 3 s by `recommender run --db postgresql+psycopg://...`, and a second run of the
    same experiment started while the first holds the lease."""
    url = postgres_server.create_database("cli_run")
    workdir = tmp_path_factory.mktemp("pg-cli")
    (workdir / "micro.yaml").write_text(MICRO.format(first=3, second=3).replace("[pt, onnx, trt]", "[pt]"))
    first = subprocess.Popen(
        [sys.executable, "-m", "recommender", "run", "micro.yaml", "--db", url],
        cwd=workdir,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for_lease(ResultStore.open(url), first)
        second = recommender(workdir, "run", "micro.yaml", "--db", url)
        out, err = first.communicate(timeout=300)
    finally:
        if first.poll() is None:  # something above failed: stop the run as Ctrl-C does (its servers torn down)
            first.send_signal(signal.SIGINT)
            first.communicate(timeout=60)
    return Measured(
        url, workdir, subprocess.CompletedProcess(first.args, first.returncode, out, err), first.pid, second
    )


def test_run_stores_its_rows_in_postgres(measured):
    url, workdir, first = measured.url, measured.workdir, measured.first
    assert first.returncode == 0, first.stdout + first.stderr
    assert "postgresql+psycopg://recommender:***@127.0.0.1" in first.stdout  # the password is never printed
    store = ResultStore.open(url)
    (result,) = store.results("micro")
    assert (result.name, result.status) == (CANDIDATE, "ok")
    assert result.headline.invocations_per_minute > 0 and result.headline.model_latency_ms > 0
    assert len(store.series(result.run_id)) >= 6 and len(store.phases(result.run_id)) == 2
    assert [w.phase_index for w in store.windows(result.run_id)] == [0, 1]
    assert store.experiment("micro").status == "done"
    assert store.lease_holder("micro") is None
    assert servers_under(workdir) == []


def test_a_second_run_meanwhile_refuses_naming_the_first(measured):
    second = measured.second
    assert second.returncode == 2, second.stdout + second.stderr
    message = " ".join(second.stderr.split())  # rich wraps long lines
    assert f"is being measured by another job: pid {measured.first_pid} on host {socket.gethostname()}" in message
    assert "since" in message and "--wait" in message and "Traceback" not in message
    assert [r.status for r in ResultStore.open(measured.url).runs("micro")] == ["ok"]  # nothing interrupted


def test_rank_and_report_read_the_rows_back(measured):
    url, workdir = measured.url, measured.workdir
    ranked = recommender(workdir, "rank", "micro", "--db", url, "--json")
    assert ranked.returncode == 0, ranked.stderr
    document = json.loads(ranked.stdout)
    assert document["experiment"] == "micro"
    assert CANDIDATE in [c["name"] for c in document["ranked"]] + [c["name"] for c in document["excluded"]]
    report = recommender(workdir, "report", "micro", "--format", "md", "--db", url)
    assert report.returncode == 0, report.stderr
    assert report.stdout.startswith("#") and CANDIDATE in report.stdout


@pytest.mark.parametrize("page", ["experiments", "ranking", "curves", "report"])
def test_the_dashboard_reads_the_rows_back(measured, page, monkeypatch):
    at = open_page(measured.url, page, monkeypatch, experiment="micro")
    assert_clean(at)
    assert "No experiments" not in texts(at)
    if page == "curves":
        assert len(charts(at)) == 4
    if page == "experiments":
        assert at.dataframe[1].value["status"].tolist() == ["ok"]


def test_the_dashboard_data_layer_reads_the_rows_back(measured, monkeypatch):
    from dashboard import source

    monkeypatch.setenv(source.DB_ENV, measured.url)
    (result,) = source.results("micro")
    assert [e.name for e in source.experiments()] == ["micro"] and result.status == "ok"
    assert [row["phase_index"] for row in source.phase_rows(result.run_id)] == [0, 1]
    assert len(source.second_rows(result.run_id)) >= 6 and len(source.window_rows(result.run_id)) == 2
