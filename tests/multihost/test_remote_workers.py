"""Remote load workers on other hosts: B and C join A's master and drive the Triton server on D1."""

from __future__ import annotations

import sys
from pathlib import Path

from recommender.store.results import ResultStore
from tests.multihost.conftest import Server, cli_env, recommender
from tests.multihost.lab import Lab, address

DELAY_MS = 10  # each way on C's link to the master: +20 ms round trip


def experiment(name: str, endpoint: str, seconds: int, remote_workers: int) -> str:
    return (
        f"name: {name}\ncorrectness: off\nvariants: {{dynamic_batching: [false]}}\n"
        f"target: {{kind: remote, endpoint: '{endpoint}'}}\n"
        f"traffic: {{warmup_seconds: 1, window_seconds: 2, remote_workers: {remote_workers}, "
        f"master_bind: '{address('a')}', master_port: 5557, worker_wait_seconds: 60, "
        f"phases: [{{initial_users: 6, spawn_rate: 100, duration_seconds: {seconds}}}]}}\n"
    )


def workers(lab: Lab, c_master: str) -> None:
    """B joins A directly; C joins through its slow link (a relay on C that delays each way by DELAY_MS)."""
    relay = [sys.executable, str(Path(__file__).parent / "delay_proxy.py"), "127.0.0.1", "5557"]
    lab.popen("c", [*relay, address("a"), "5557", str(DELAY_MS)])
    lab.popen("b", recommender("worker", "--master", f"{address('a')}:5557", "--runs", "1"), env=cli_env())
    lab.popen("c", recommender("worker", "--master", c_master, "--runs", "1"), env=cli_env())


def test_workers_on_two_hosts_drive_a_target_on_a_third(lab: Lab, d1: Server, tmp_path: Path) -> None:
    (tmp_path / "mh.yaml").write_text(experiment("mh-workers", d1.endpoint, seconds=8, remote_workers=2))
    workers(lab, c_master="127.0.0.1:5557")
    before = d1.inference_count()
    done = lab.run("a", recommender("run", "mh.yaml"), timeout=240, cwd=tmp_path, env=cli_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    served = d1.inference_count() - before
    (result,) = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("mh-workers")
    assert result.status == "ok", result.reason
    generator = result.server_stats["generator"]
    clocks = {entry["worker"].split("_")[0]: entry for entry in generator["clocks"]}
    assert set(clocks) >= {"rmh-b", "rmh-c"}, clocks  # each worker on its own host, named by it
    logged = sum(entry["requests"] for entry in generator["clocks"])
    cut = sum(entry["cut"] for entry in generator["clocks"])
    counts = (logged, result.headline.requests, cut, served)
    # every request D1 answered is in the merged log exactly once, or counted as cut: sent by a user Locust stopped
    # before the answer came (D1 also answered the probe sent before the load)
    print("counts (logged, headline, cut, served):", counts)
    assert logged == result.headline.requests > 100, counts
    assert logged + cut == served - 1, counts
    rtt_b, rtt_c = clocks["rmh-b"]["clock_rtt_us"], clocks["rmh-c"]["clock_rtt_us"]
    print(
        f"merged {logged} = D1 {served} - 1 probe; round trip B {rtt_b / 1000:.2f} ms, C {rtt_c / 1000:.2f} ms; "
        f"offset C {clocks['rmh-c']['clock_offset_us'] / 1000:.2f} ms; p90 {result.headline.latency('p90'):.2f} ms"
    )
    assert rtt_c >= 2 * DELAY_MS * 1000 > rtt_b, (rtt_b, rtt_c)  # C's slow link shows in its round trip
    assert abs(clocks["rmh-c"]["clock_offset_us"]) <= rtt_c / 2 + 2000  # and its clock is still aligned within it
    # the latency is the target's side: C's link to the master is slow, its link to D1 is not
    assert result.headline.latency("p90") < 2 * DELAY_MS, result.headline.latency_ms
