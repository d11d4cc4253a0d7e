"""Links cut mid-level: a worker's (the run completes without it, flagged) and the target's (the candidate fails in
one line, the job goes on, nothing is left running on A)."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from recommender.store.results import ResultStore
from tests.multihost.conftest import Server, cli_env, recommender
from tests.multihost.lab import Lab, address
from tests.multihost.test_remote_workers import experiment


def once_loaded(server: Server, at_least: int = 200, timeout: float = 90) -> None:
    """Returns once `server` has answered `at_least` more requests (the load is running)."""
    start, deadline = server.inference_count(), time.monotonic() + timeout
    while server.inference_count() < start + at_least:
        assert time.monotonic() < deadline, "the load never reached the server"
        time.sleep(0.2)


def run_cutting(lab: Lab, workdir: Path, file: str, cut: Callable[[], None]) -> subprocess.CompletedProcess:
    job = lab.popen("a", recommender("run", file), cwd=workdir, env=cli_env(), stdout=subprocess.PIPE, text=True)
    try:
        cut()
        output, _ = job.communicate(timeout=240)
    finally:
        if job.poll() is None:
            job.kill()
    return subprocess.CompletedProcess(job.args, job.returncode, output, "")


def test_a_worker_cut_off_mid_level_is_flagged_and_the_run_completes(lab: Lab, d1: Server, tmp_path: Path) -> None:
    (tmp_path / "cut.yaml").write_text(experiment("mh-worker-cut", d1.endpoint, seconds=14, remote_workers=2))
    for host in ("b", "c"):
        lab.popen(host, recommender("worker", "--master", f"{address('a')}:5557", "--runs", "1"), env=cli_env())

    def cut_b() -> None:
        once_loaded(d1)
        lab.cut("b")

    try:
        done = run_cutting(lab, tmp_path, "cut.yaml", cut_b)
    finally:
        lab.stop("b")  # its worker lost the master with its users running: it would load D1 again once reconnected
        lab.stop("c")
        lab.restore("b")
    assert done.returncode == 0, done.stdout[-3000:]
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    (result,) = store.results("mh-worker-cut")
    assert result.status == "ok", result.reason
    lost = result.server_stats["generator"]["lost_workers"]
    assert [entry["worker"].split("_")[0] for entry in lost] == ["rmh-b"], lost
    phases = store.phases(result.run_id)
    assert any(flag.startswith("worker dropped at") for flag in phases[0].flags or []), phases[0].flags
    records = store.window_records(result.run_id)
    keys = [(w.repeat, w.phase_index, w.index) for w in records]
    # every window stored once, to the end of the level (1 s warm-up, then 6 windows of 2 s): C carried the load on
    assert sorted(keys) == [(0, 0, index) for index in range(6)], keys


def test_the_target_cut_off_fails_its_candidate_and_the_job_goes_on(
    lab: Lab, d1: Server, d2: Server, tmp_path: Path
) -> None:
    targets = "".join(
        f"  - {{kind: remote, endpoint: '{server.endpoint}', instance_type: {server.host}-box}}\n"
        for server in (d1, d2)
    )
    (tmp_path / "two.yaml").write_text(
        "name: mh-target-cut\ncorrectness: off\nvariants: {dynamic_batching: [false]}\n"
        f"targets:\n{targets}"
        "traffic: {warmup_seconds: 1, window_seconds: 2, phases: [{initial_users: 2, duration_seconds: 10}]}\n"
    )

    def cut_d1() -> None:
        once_loaded(d1)
        lab.cut("d1")

    try:
        done = run_cutting(lab, tmp_path, "two.yaml", cut_d1)
    finally:
        lab.restore("d1")
    assert lab.pids("a") == []  # nothing of the job is left running on A
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = {r.config.get("target"): r for r in store.results("mh-target-cut")}
    assert set(results) == {"d1-box", "d2-box"}, {k: (r.status, r.reason) for k, r in results.items()}
    failed, measured = results["d1-box"], results["d2-box"]
    assert failed.status == "failed" and address("d1") in (failed.reason or ""), (failed.reason, done.stdout[-4000:])
    assert "\n" not in failed.reason  # one line
    assert measured.status == "ok", measured.reason  # the job went on to the next target
    assert done.returncode == 0, done.stdout[-3000:]
