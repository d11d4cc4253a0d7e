"""Faults during a run, on the real server through the CLI: the candidate hit is recorded failed with a one-line
reason, everything is torn down, and the job goes on to the next candidate."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from recommender.store.results import ResultStore
from tests.integration.test_cli_run import MICRO, cli_env, generators_under, servers_under, start_run

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "micro.yaml").write_text(MICRO.format(first=4, second=4).replace("[pt, onnx, trt]", "[pt, onnx]"))
    return tmp_path


def run_killing(workdir: Path, victim) -> tuple[subprocess.CompletedProcess, dict[str, tuple[str, str]]]:
    """Run micro.yaml; once the first candidate's load runs, kill the process `victim(workdir)` returns."""
    job = start_run(workdir)
    deadline = time.monotonic() + 150
    while not generators_under(workdir) and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(1.5)  # into the load
    victim(workdir).kill()
    output, _ = job.communicate(timeout=240)
    store = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}")
    return output, job.returncode, {r.name: (r.status, r.reason) for r in store.results("micro")}


def stub(workdir: Path) -> psutil.Process:
    return next(p for p in servers_under(workdir) if "triton_python_backend_stub" in " ".join(p.cmdline()))


def generator(workdir: Path) -> psutil.Process:
    return generators_under(workdir)[0]


@pytest.mark.parametrize(
    ("victim", "reason"),
    [
        (stub, "the server crashed during the load: triton_python_ba"),
        (generator, "the load generator exited with code -9"),
    ],
)
def test_a_process_killed_during_the_load_fails_the_candidate_and_the_job_goes_on(workdir, victim, reason):
    output, code, results = run_killing(workdir, victim)
    assert code == 0, output
    status, why = results["pt-nodb-ig1-mbs4"]
    assert status == "failed" and why.startswith(reason) and "\n" not in why, why
    assert results["onnx-nodb-ig1-mbs4"][0] == "ok"
    assert servers_under(workdir) == [] and generators_under(workdir) == []
    assert "Traceback" not in output


def test_a_read_only_database_stops_the_job_cleanly(workdir):
    """Root ignores file modes, so the database is opened read-only by SQLite itself (mode=ro)."""
    ResultStore.open(f"sqlite:///{workdir / 'results.db'}")  # created and migrated
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "recommender",
            "run",
            "micro.yaml",
            "--db",
            f"sqlite:///file:{workdir / 'results.db'}?mode=ro&uri=true",
        ],
        cwd=workdir,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert "error: cannot take the lease of experiment 'micro': the database is read-only\n" in done.stderr
    assert "Traceback" not in done.stderr and servers_under(workdir) == []
