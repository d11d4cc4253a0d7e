"""Faults of the host's resources on the real server: a port taken, a model that fails to load, a locked database,
a database or run directory on a full disk. Each candidate hit is recorded failed with a one-line reason and the job
goes on; where the job cannot go on (the database refuses) it stops with exit 1 and one message. Never a traceback,
never a server left running."""

from __future__ import annotations

import errno
import os
import re
import secrets
import socket
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from recommender.candidates import expand_candidates
from recommender.errors import TargetError
from recommender.modelrepo.export import export_model
from recommender.spec import load_spec
from recommender.store.results import ResultStore
from recommender.targets import triton_binary
from recommender.targets.local import LocalDeployment, prepare_run_directory
from recommender.targets.server_process import LOOPBACK, free_loopback_ports
from tests.integration.test_cli_run import MICRO, cli_env, generators_under, servers_under, start_run

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "micro.yaml").write_text(MICRO.format(first=3, second=3).replace("[pt, onnx, trt]", "[pt, onnx]"))
    return tmp_path


@pytest.fixture
def tiny_disk(tmp_path):
    """A real 1 MiB tmpfs (root may mount here): writes beyond it fail with ENOSPC."""
    mount = tmp_path / "tiny"
    mount.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    yield mount
    subprocess.run(["umount", "--lazy", str(mount)], check=True)


def fill(path: Path) -> None:
    """Write zeros to `path` until its file system is full."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(descriptor, b"\0" * 4096):
            pass
    except OSError as error:
        assert error.errno == errno.ENOSPC
    finally:
        os.close(descriptor)


def run(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recommender", "run", "micro.yaml", *args],
        cwd=workdir,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def stored(workdir: Path) -> dict[str, tuple[str, str]]:
    store = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}")
    return {r.name: (r.status, r.reason) for r in store.results("micro")}


def assert_clean(workdir: Path, done: subprocess.CompletedProcess) -> None:
    assert "Traceback" not in done.stdout + done.stderr
    assert servers_under(workdir) == [] and generators_under(workdir) == []


def test_a_taken_port_fails_the_deployment_in_one_line_and_leaves_nothing(tmp_path):
    """The OS-chosen port is taken by someone else before tritonserver binds it (the race free_loopback_ports has)."""
    install = triton_binary.preflight()
    with socket.socket() as taker:
        taker.bind((LOOPBACK, 0))
        taker.listen(1)
        port = taker.getsockname()[1]
        (tmp_path / "repo").mkdir()
        deployment = LocalDeployment(
            "model", tmp_path / "repo", tmp_path / "run", (port, *free_loopback_ports(2)), instance=secrets.token_hex(4)
        )
        command = deployment.command(install.binary, prepare_run_directory(install, tmp_path / "run"), 5)
        with pytest.raises(TargetError) as failure, deployment.starting():
            deployment.launch(command, triton_binary.server_environment(install))
            deployment.wait_until_ready(60)
    message = failure.value.message
    assert "\n" not in message, message
    assert re.search(r"tritonserver exited with code -?\d+ before", message), (
        message
    )  # 1 or 0: it varies with the shutdown
    assert f"Socket '{LOOPBACK}:{port}' already in use" in message
    assert deployment.server_pids() == [] and servers_under(tmp_path) == []


def test_a_model_that_fails_to_load_fails_its_candidate_and_the_job_goes_on(workdir):
    """The pt export in the artifact cache is corrupted on disk: Triton cannot load that model; onnx is unaffected."""
    spec = load_spec(workdir / "micro.yaml")
    pt = next(c for c in expand_candidates(spec) if c.optimization == "pt")
    artifact = export_model(
        spec.model, "pt", spec.payload.sequence_length, pt.model_fingerprint, workdir / ".recommender" / "artifacts"
    )
    artifact.path.write_bytes(b"not a torchscript file")
    done = run(workdir)
    assert done.returncode == 0, done.stdout + done.stderr
    status, reason = stored(workdir)[pt.name]
    assert status == "failed" and "\n" not in reason, reason
    assert reason.startswith("tritonserver exited with code") and "failed to load 'model'" in reason
    assert stored(workdir)["onnx-nodb-ig1-mbs4"][0] == "ok"
    assert_clean(workdir, done)


def test_a_database_locked_beyond_the_busy_timeout_stops_the_job_cleanly(workdir):
    """Another connection takes SQLite's exclusive lock during the first load and keeps it: the job cannot store the
    measurement, so it stops with exit 1 and one message (the server already torn down); a later run resumes."""
    job = start_run(workdir, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 150
    while not generators_under(workdir) and time.monotonic() < deadline:
        time.sleep(0.2)
    locker = sqlite3.connect(workdir / ".recommender/results.db", timeout=0, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        stdout, stderr = job.communicate(timeout=240)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert job.returncode == 1, stdout + stderr
    (error,) = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert (
        error == "error: results database write failed: the database is locked: another connection held a write "
        "lock beyond the busy timeout"
    ), stderr
    assert "[SQL:" not in stderr and "Close what holds the SQLite file" in stderr
    assert_clean(workdir, subprocess.CompletedProcess([], 1, stdout, stderr))
    assert {name: status for name, (status, _) in stored(workdir).items()} == {"pt-nodb-ig1-mbs4": "running"}
    resumed = run(workdir)  # the lock gone: the next job marks the stale row interrupted and measures both
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert {name: status for name, (status, _) in stored(workdir).items()} == {
        "pt-nodb-ig1-mbs4": "ok",
        "onnx-nodb-ig1-mbs4": "ok",
    }
    store = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}")
    assert sorted(r.status for r in store.runs("micro")) == ["interrupted", "ok", "ok"]


def test_a_full_disk_under_the_run_directory_fails_each_candidate_in_one_line(workdir, tiny_disk):
    done = run(workdir, "--run-dir", str(tiny_disk / "runs"))
    assert done.returncode == 1, done.stdout + done.stderr  # nothing measured: exit 1 after the table (issue 23)
    assert "no candidate was measured" in done.stdout
    results = stored(workdir)
    assert {status for status, _ in results.values()} == {"failed"}
    for _, reason in results.values():
        assert "No space left on device" in reason and "\n" not in reason, reason
    assert results["pt-nodb-ig1-mbs4"][1].startswith(f"cannot write the server's files in {tiny_disk / 'runs'}")
    assert_clean(workdir, done)


def test_a_database_on_a_full_disk_stops_the_job_before_any_deployment(workdir, tiny_disk):
    ResultStore.open(f"sqlite:///{tiny_disk / 'results.db'}")  # created and migrated while there was room
    fill(tiny_disk / "filler")
    done = run(workdir, "--db", f"sqlite:///{tiny_disk / 'results.db'}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "the disk holding the database is full" in done.stderr and "Free space there" in done.stderr
    assert_clean(workdir, done)
