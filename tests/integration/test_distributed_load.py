"""Locust's distributed mode against the real tritonserver: every worker's requests merged, a lost worker recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil
import pytest

from recommender.load.runner import LoadRequest, LoadResult, run_load
from recommender.load.shapes import compile_traffic
from recommender.measurement.repeats import summarize_load
from recommender.metrics.rules import Rules, WindowRules
from recommender.metrics.triton_stats import stats_delta
from recommender.spec import Phase, TrafficSpec
from recommender.targets.registry import get_target

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]

BODY = {
    "inputs": [
        {"name": "input_ids", "shape": [1, 5], "datatype": "INT64", "data": [3, 7, 11, 2, 9]},
        {"name": "attention_mask", "shape": [1, 5], "datatype": "INT64", "data": [1, 1, 1, 1, 1]},
    ]
}


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, artifacts):
    from recommender.candidates import Candidate
    from recommender.modelrepo.repository import write_model_repository
    from recommender.spec import DynamicBatching

    work = tmp_path_factory.mktemp("distributed")
    candidate = Candidate(
        "onnx", DynamicBatching(max_queue_delay_microseconds=0, preferred_batch_size=[]), 1, 4, "local"
    )
    repository = write_model_repository(candidate, artifacts["onnx"], work / "repo")
    target = get_target("local", ready_timeout=90)
    target.preflight()
    deployed = target.deploy(repository, "model", work / "run")
    yield deployed
    deployed.teardown()


def worker_processes() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "--worker" in child.cmdline():
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


def drive(deployment, out_dir: Path, seconds: float, users: int = 4, url: str = "") -> tuple[LoadResult, int]:
    before = deployment.statistics()
    request = LoadRequest(
        url or deployment.load_url,
        "model",
        [BODY],
        [Phase(initial_users=users, duration_seconds=seconds)],
        out_dir,
        workers=2,
    )
    result = run_load(request)
    return result, stats_delta(before, deployment.statistics()).inference_count


def test_two_workers_records_are_merged_exactly_on_one_clock(deployment, tmp_path: Path) -> None:
    result, served = drive(deployment, tmp_path, 4)
    assert len(result.requests) == served > 50  # every request the server answered is in the merged log, once
    assert result.requests.failures == 0 and result.lost_workers == ()
    assert [entry["index"] for entry in result.generators] == [0, 1]
    assert all(entry["requests"] > 0 for entry in result.generators)
    assert sum(entry["requests"] for entry in result.generators) == len(result.requests)
    assert all(abs(entry["clock_offset_us"]) <= entry["clock_rtt_us"] / 2 + 1000 for entry in result.generators)
    assert (
        result.requests.t_s.min() >= 0 and result.requests.t_s.max() < 5.5
    )  # the shape ticks once a second: the stop can come ~1 s late
    assert result.timeline.cpu_max_percent is not None and result.workers == 2


def test_a_trace_is_shared_between_two_workers_and_merged_at_its_times(deployment, tmp_path: Path) -> None:
    """Each worker reads the trace file and takes every other send: the merged log holds every line once, at its
    time, with the late-send accounting of a single process."""
    stamps = np.round(np.cumsum(np.random.default_rng(2).exponential(0.04, size=80)), 6)  # ~25 requests/s, ~3 s
    trace = tmp_path / "trace.txt"
    trace.write_text("".join(f"{t:.6f}\n" for t in stamps))
    plan = compile_traffic(TrafficSpec(trace={"file": str(trace), "max_concurrency": 4}))
    result = run_load(LoadRequest(deployment.load_url, "model", [BODY], plan, tmp_path / "run", workers=2))
    log = result.requests
    assert np.sort(log.t_s) == pytest.approx(stamps - stamps[0], abs=1e-6)
    assert log.failures == 0 and log.late_us is not None and log.late_us.min() >= 0
    assert sorted(entry["requests"] for entry in result.generators) == [40, 40]


def test_requests_in_flight_when_the_plan_ends_are_logged_not_cut(deployment, tmp_path: Path) -> None:
    """Through a relay adding 25 ms each way every user has a request in flight at the end: the workers drain them
    before Locust stops their users, so the server's count still equals the merged log."""
    from urllib.parse import urlsplit

    from recommender.load.generators import free_port

    server = urlsplit(deployment.load_url)
    port = free_port()
    relay = ROOT / "tests/multihost/delay_proxy.py"
    proxy = subprocess.Popen(
        [sys.executable, str(relay), "127.0.0.1", str(port), server.hostname, str(server.port), "25"]
    )
    try:
        time.sleep(0.5)
        result, served = drive(deployment, tmp_path, 3, users=6, url=f"http://127.0.0.1:{port}")
    finally:
        proxy.kill()
        proxy.wait()
    assert result.requests.failures == 0 and result.lost_workers == ()
    assert len(result.requests) == served > 50, (len(result.requests), served)


def test_a_worker_killed_mid_run_is_recorded_and_the_level_flagged(deployment, tmp_path: Path) -> None:
    killed: list[int] = []

    def kill_one_worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            workers = worker_processes()
            if len(workers) == 2 and (tmp_path / "progress.json").exists():
                time.sleep(1.5)
                killed.append(workers[0].pid)
                os.kill(workers[0].pid, signal.SIGKILL)
                return
            time.sleep(0.1)

    killer = threading.Thread(target=kill_one_worker)
    killer.start()
    result, served = drive(deployment, tmp_path, 8)
    killer.join()
    assert killed
    reasons = [entry["reason"] for entry in result.lost_workers]
    assert any(f"(pid {killed[0]}) killed by SIGKILL" in reason for reason in reasons), reasons
    assert any("no heartbeat" in reason for reason in reasons), reasons  # the master saw it too
    assert result.requests.t_s.max() > 7  # the other worker carried the load to the end
    assert served >= len(result.requests)  # the lost worker's last rows are missing, never invented
    repeat = summarize_load(result, request_plan(8), Rules(windows=WindowRules(warmup_s=1, window_s=2)), [], {})
    assert any(flag.startswith("worker dropped at") for flag in repeat.phases[0].flags), repeat.phases[0].flags


def request_plan(seconds: float):
    return LoadRequest("http://x", "m", [BODY], [Phase(initial_users=4, duration_seconds=seconds)], Path(".")).plan


@pytest.fixture
def cli_worker(tmp_path: Path):
    """`recommender worker --master 127.0.0.1:PORT --runs 1` as its own process, as a remote host would start it."""
    from recommender.load.generators import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    log = (tmp_path / "cli-worker.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, "-m", "recommender", "worker", "--master", f"127.0.0.1:{port}", "--runs", "1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=tmp_path,
        start_new_session=True,
    )
    yield port, process
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    log.close()


def test_a_worker_started_with_the_cli_command_gets_its_settings_from_the_master_and_is_merged(
    deployment, tmp_path: Path, cli_worker
) -> None:
    from recommender.load.generators import MasterSettings

    port, process = cli_worker
    before = deployment.statistics()
    request = LoadRequest(
        deployment.load_url,
        "model",
        [BODY],
        [Phase(initial_users=4, duration_seconds=4)],
        tmp_path / "run",
        workers=1,
        master=MasterSettings(port=port, remote_workers=1, wait_s=60),
    )
    result = run_load(request)
    served = stats_delta(before, deployment.statistics()).inference_count
    assert len(result.requests) == served > 50
    assert result.requests.failures == 0 and result.lost_workers == ()
    assert len(result.generators) == 2 and all(entry["requests"] > 0 for entry in result.generators)
    assert process.wait(timeout=30) == 0  # the CLI worker served its one run and quit with the master
    assert "run 1 ended (Locust worker exit 0)" in (tmp_path / "cli-worker.log").read_text()


def test_a_remote_worker_that_never_joins_fails_the_run_with_a_message_naming_it(deployment, tmp_path: Path) -> None:
    from recommender.errors import LoadError
    from recommender.load.generators import MasterSettings

    request = LoadRequest(
        deployment.load_url,
        "model",
        [BODY],
        [Phase(initial_users=2, duration_seconds=2)],
        tmp_path,
        workers=1,
        master=MasterSettings(remote_workers=1, port=None, wait_s=3),
    )
    with pytest.raises(LoadError) as raised:
        run_load(request)
    assert "not all 2 expected load workers (1 on this host, 1 remote)" in raised.value.message
    assert "within 3 s" in raised.value.message and "recommender worker --master HOST:" in raised.value.hint
    assert worker_processes() == []
