"""The CLI end to end on a micro spec: real export, real tritonserver, real Locust, real SQLite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from recommender.store.results import ResultStore
from recommender.targets.leftovers import ServerRecord
from tests.fixtures_text import TINY_BERT_YAML

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]

MICRO = (
    """
name: micro
"""
    + TINY_BERT_YAML
    + """variants:
  optimizations: [pt, onnx, trt]
  dynamic_batching: [false]
  instance_counts: [1]
  max_batch_sizes: [4]
traffic:
  warmup_seconds: 1
  phases:
    - {{initial_users: 1, spawn_rate: 0, duration_seconds: {first}}}
    - {{initial_users: 2, spawn_rate: 0, duration_seconds: {second}}}
"""
)


REPO_ROOT = Path(__file__).resolve().parents[2]


def cli_env() -> dict[str, str]:
    """This checkout first on the path: an installed (editable) `recommender` elsewhere must not be the one tested."""
    path = os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "COLUMNS": "250", "PYTHONPATH": path}


def start_run(workdir: Path, stderr: int = subprocess.STDOUT) -> subprocess.Popen:
    """`recommender run micro.yaml` started in the background (stdout piped; stderr with it unless told)."""
    return subprocess.Popen(
        [sys.executable, "-m", "recommender", "run", "micro.yaml"],
        cwd=workdir,
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def recommender(workdir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env=cli_env(),
        **kwargs,
    )


def servers_under(path: Path) -> list[psutil.Process]:
    """tritonserver / backend stub processes whose command line mentions `path`."""
    found = []
    for proc in psutil.process_iter(["cmdline", "name"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if str(path) in cmdline and ("tritonserver" in cmdline or "triton_python_backend_stub" in cmdline):
            found.append(proc)
    return found


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "micro.yaml").write_text(MICRO.format(first=4, second=4))
    return tmp_path


def test_run_measures_stores_ranks_and_resumes(workdir):
    first = recommender(workdir, "run", "micro.yaml")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "RANDOM weights" in first.stdout
    assert "skipped" in first.stdout and "TensorRT needs an NVIDIA GPU" in first.stdout

    results = {r.name: r for r in ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}").results("micro")}
    assert {name: r.status for name, r in results.items()} == {
        "pt-nodb-ig1-mbs4": "ok",
        "onnx-nodb-ig1-mbs4": "ok",
        "trt-nodb-ig1-mbs4": "skipped",
    }
    for name in ("pt-nodb-ig1-mbs4", "onnx-nodb-ig1-mbs4"):
        headline = results[name].headline
        assert headline.invocations_per_minute > 0
        assert headline.max_invocations == headline.invocations_per_minute and headline.repeats == 1
        assert headline.model_latency_ms > 0 and headline.stop_reason is None
        assert results[name].server_stats["execution_count"] > 0
    assert "MaxInvocations/min" in first.stdout and "end of traffic" in first.stdout
    store = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}")
    assert len(store.series(results["pt-nodb-ig1-mbs4"].run_id)) >= 8
    windows = store.windows(results["pt-nodb-ig1-mbs4"].run_id)
    assert [(w.phase_index, w.start_s, w.end_s) for w in windows] == [(0, 1, 4), (1, 5, 8)]  # 4 s phases, 1 s warm-up
    assert windows[0].server_cpu_percent is not None and windows[0].server_rss_mb > 0 and windows[0].samples > 0
    assert servers_under(workdir) == []

    second = recommender(workdir, "run", "micro.yaml")
    assert second.returncode == 0
    assert second.stdout.count("stored, not measured again") == 3

    as_json = recommender(workdir, "run", "micro.yaml", "--json")  # stdout: the document alone; progress on stderr
    assert as_json.returncode == 0, as_json.stderr
    document = json.loads(as_json.stdout)
    assert document["recommended"] in ("pt-nodb-ig1-mbs4", "onnx-nodb-ig1-mbs4")
    assert [e["name"] for e in document["excluded"]] == ["trt-nodb-ig1-mbs4"]
    assert as_json.stderr.count("stored, not measured again") == 3


def statuses(workdir: Path) -> list[str]:
    db = workdir / ".recommender/results.db"
    return [r.status for r in ResultStore.open(f"sqlite:///{db}").runs("micro")] if db.exists() else []


def test_ctrl_c_leaves_no_server_and_the_next_run_resumes(workdir):
    job = start_run(workdir)
    deadline = time.monotonic() + 150
    # wait until the first candidate is stored and the second one's server is up, then press Ctrl-C
    while not (statuses(workdir)[:1] == ["ok"] and servers_under(workdir)) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert servers_under(workdir), "the second candidate's server never started"
    job.send_signal(signal.SIGINT)
    output, _ = job.communicate(timeout=60)
    assert job.returncode == 130, output
    assert "interrupted" in output
    assert servers_under(workdir) == []
    assert statuses(workdir) == ["ok", "interrupted"]

    resumed = recommender(workdir, "run", "micro.yaml")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert resumed.stdout.count("stored, not measured again") == 1  # only the first candidate was complete
    assert statuses(workdir) == ["ok", "interrupted", "ok", "skipped"]


def generators_under(path: Path) -> list[psutil.Process]:
    """Locust children working in a directory under `path`."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if "locust" in (proc.info["cmdline"] or []) and str(path) in proc.cwd():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def start_and_wait_for_load(workdir: Path) -> subprocess.Popen:
    """`recommender run micro.yaml` in the background, returned once the first candidate's generator runs."""
    job = start_run(workdir)
    deadline = time.monotonic() + 150
    while not (servers_under(workdir) and generators_under(workdir)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert generators_under(workdir), "the load never started"
    return job


def test_sigterm_during_load_tears_everything_down_and_exits_143(workdir):
    job = start_and_wait_for_load(workdir)
    (pid_file,) = (workdir / ".recommender").rglob("server.pid")
    shm_prefix = ServerRecord.read(pid_file.parent).shm_prefix
    job.send_signal(signal.SIGTERM)
    output, _ = job.communicate(timeout=60)
    assert job.returncode == 143, output
    assert "interrupted (SIGTERM)" in output and "Traceback" not in output
    assert servers_under(workdir) == [] and generators_under(workdir) == []
    runs = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}").runs("micro")
    assert [(r.status, r.reason) for r in runs] == [("interrupted", "interrupted by SIGTERM")]
    assert list(Path("/dev/shm").glob(f"{shm_prefix}*")) == [] and not pid_file.exists()


def test_after_kill_9_the_next_run_stops_the_leftovers_and_measures(workdir):
    job = start_and_wait_for_load(workdir)
    job.kill()
    job.communicate(timeout=30)
    pid_files = list((workdir / ".recommender").rglob("server.pid"))
    assert len(pid_files) == 1, "the killed job's server left its pid file"
    resumed = recommender(workdir, "run", "micro.yaml")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert servers_under(workdir) == [] and generators_under(workdir) == []
    assert not pid_files[0].exists()
    assert statuses(workdir) == ["interrupted", "ok", "ok", "skipped"]  # the lease of the dead job was taken over
