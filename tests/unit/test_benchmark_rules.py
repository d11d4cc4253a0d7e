"""The benchmarks' rules: every tool scored by the same window rule from its own first send, short runs refused,
wrk read from its per-request log, the search's pick judged on the objective searched, the peer's pick measured with
its own settings and a peer's failure recorded (benchmarks/generator.py, fidelity.py, search.py, measurement.py)."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fidelity
import generator
import measurement
import peer_model_analyzer
import search
from measurement import window_stats
from perf_analyzer_tool import PerfAnalyzer

from recommender.candidates import expand_candidates
from recommender.load.result import LoadResult
from recommender.metrics.intervals import Interval
from recommender.metrics.records import RequestLog, Timeline
from recommender.spec import load_spec

RNG_SEED = 7


def closed_loop(connections: int, first_s: float, until_s: float, latency_s, gap_s: float = 0.0001):
    """Sends and answers of a closed loop: each connection sends again `gap_s` after its answer.

    `latency_s(send_time, rng)` gives each request's latency. Returns (sends, answers) of the pairs, in send order.
    """
    rng = np.random.default_rng(RNG_SEED)
    sends, answers = [], []
    for connection in range(connections):
        t = first_s + connection * 0.0003
        while t < until_s:
            done = t + latency_s(t, rng)
            sends.append(t)
            answers.append(done)
            t = done + gap_s
    order = np.argsort(sends)
    return np.array(sends)[order], np.array(answers)[order]


def write_wrk_log(path: Path, sends_s, answers_s, codes, socket_errors: int = 0) -> Path:
    """The file the Lua done hook writes: microseconds on CLOCK_MONOTONIC; the first send is wrk's script check."""
    check = float(sends_s[0]) - 0.05
    answers_s = np.asarray(answers_s)
    path.write_text(
        json.dumps(
            {
                "socket_errors": socket_errors,
                "max_latency_us": int(np.max(answers_s - np.asarray(sends_s)[: len(answers_s)]) * 1e6),
                "threads": [
                    {
                        "sends": [round(t * 1e6) for t in [check, *sends_s]],
                        "answers": [round(t * 1e6) for t in answers_s],
                        "codes": [int(c) for c in codes],
                    }
                ],
            }
        )
    )
    return path


def test_wrk_at_one_connection_pairs_each_send_with_its_answer_after_wrks_script_check(tmp_path: Path) -> None:
    base = 5000.0  # CLOCK_MONOTONIC seconds, as wrk logs them
    sends, answers = closed_loop(1, base, base + 2.0, lambda t, rng: 0.0005 + rng.exponential(0.0003))
    sends_us, answers_us = np.round(sends * 1e6), np.round(answers * 1e6)
    log = generator.WrkLog.read(write_wrk_log(tmp_path / "log.json", sends, answers, [200] * len(sends)))
    start, end = generator.log_window("wrk", log.sends_s, log.covered_until_s, 0.5, 1.0)
    assert (start, end) == pytest.approx((sends_us[0] / 1e6 + 0.5, sends_us[0] / 1e6 + 1.5))
    expected = window_stats(sends_us / 1e6, answers_us - sends_us, np.ones(len(sends), bool), start, end)
    got = generator.wrk_stats(log, 1, start, end)
    assert got.requests == expected.requests > 1000
    assert (got.throughput, got.p50_ms, got.p95_ms) == pytest.approx(
        (expected.throughput, expected.p50_ms, expected.p95_ms), abs=1e-9
    )


def test_wrk_with_many_connections_counts_by_the_same_rule_as_a_paired_log(tmp_path: Path) -> None:
    sends, answers = closed_loop(4, 100.0, 103.0, lambda t, rng: 0.002 + rng.exponential(0.004))
    codes = np.where((answers > 101.2) & (answers < 101.3), 500, 200)  # a burst of failures inside the window
    paired = window_stats(sends, (answers - sends) * 1e6, codes == 200, 100.5, 102.5)
    order = np.argsort(answers)  # wrk logs answers as they come, not tied to their sends
    log = generator.WrkLog.read(write_wrk_log(tmp_path / "log.json", sends, answers[order], codes[order]))
    got = generator.wrk_stats(log, 4, 100.5, 102.5)
    assert paired.failures > 0
    assert (got.requests, got.failures) == (paired.requests, paired.failures)
    assert got.throughput == pytest.approx(paired.throughput)
    assert np.isnan(got.p50_ms) and np.isnan(got.p95_ms)  # no latency without pairs


def test_wrk_with_lost_requests_is_not_counted(tmp_path: Path) -> None:
    sends, answers = closed_loop(4, 100.0, 103.0, lambda t, rng: 0.002)
    log = generator.WrkLog.read(
        write_wrk_log(tmp_path / "log.json", sends, answers, [200] * len(answers), socket_errors=3)
    )
    with pytest.raises(RuntimeError, match="3 socket errors"):
        generator.wrk_stats(log, 4, 100.5, 102.5)


class FakeSampler:
    """CpuSampler's reading side: 0.25 cores for any process, and the windows asked for."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, float, float]] = []

    def cpu_between(self, name: str, start_s: float, end_s: float) -> float:
        self.asked.append((name, start_s, end_s))
        return 0.25 * (end_s - start_s)


def load_result(first_s: float, until_s: float, duration_s: float, late: bool = False) -> LoadResult:
    """One user from `first_s`: 1 ms per request, 4 ms after 4.2 s (so a window placed wrong counts differently)."""
    sends, answers = closed_loop(1, first_s, until_s, lambda t, rng: 0.001 if t < 4.2 else 0.004)
    n = len(sends)
    late_us = np.full(n, 200) if late else None
    t_s = sends - (late_us / 1e6 if late_us is not None else 0)  # open loop: t_s is the scheduled send
    log = RequestLog(t_s, np.round((answers - t_s) * 1e6), np.ones(n, bool), np.ones(n, np.int32), late_us)
    seconds = np.arange(0.5, duration_s, 1.0)
    timeline = Timeline(seconds, np.ones(len(seconds)), np.ones(len(seconds)), np.full(len(seconds), 50.0))
    return LoadResult(log, timeline, started_at=time.time(), duration_s=duration_s)


def generator_args(**overrides) -> argparse.Namespace:
    return argparse.Namespace(**{"warmup": 1.0, "duration": 3.0, **overrides})


def test_generator_scores_ours_from_its_first_send_with_the_server_cpu_of_the_same_window(monkeypatch, tmp_path):
    result = load_result(0.3, 5.3, 5.3)
    monkeypatch.setattr(generator, "run_load", lambda request: result)
    sampler = FakeSampler()
    run = generator.run_ours("http://x", sampler, [{}], generator_args(), tmp_path, generator.Tool("fasthttp", 1))
    log = result.requests
    expected = window_stats(log.t_s, log.latency_us, log.ok, 1.3, 4.3)
    assert (run.requests_per_s, run.p50_ms) == pytest.approx((expected.throughput, expected.p50_ms))
    assert run.generator_cores == pytest.approx(0.5)  # the Timeline's 50 % in the window
    ((name, start, end),) = sampler.asked
    zero = result.started_at - (time.time() - time.monotonic())
    assert name == "server" and (start - zero, end - zero) == pytest.approx((1.3, 4.3), abs=0.05)


def test_generator_refuses_our_run_when_it_stopped_before_its_window_ended(monkeypatch, tmp_path):
    monkeypatch.setattr(generator, "run_load", lambda request: load_result(0.3, 4.0, 4.0))
    with pytest.raises(measurement.ShortRun, match=r"ran 3\.70 s from its first send"):
        generator.run_ours("http://x", FakeSampler(), [{}], generator_args(), tmp_path, generator.Tool("fasthttp", 1))


FAKE_WRK = """#!{python}
import json, os, sys, time
seconds = int(sys.argv[sys.argv.index("-t1") + 2].removeprefix("-d").removesuffix("s"))
t0 = time.monotonic()
sends = [t0 + 0.001 * i for i in range(int(seconds * 1000) - 20)]
log = {{"socket_errors": 0, "max_latency_us": 500, "threads": [{{
    "sends": [round(t0 * 1e6) - 1000] + [round(t * 1e6) for t in sends],
    "answers": [round(t * 1e6) + 500 for t in sends], "codes": [200] * len(sends)}}]}}
time.sleep(seconds)
open(os.environ["BENCH_LOG"], "w").write(json.dumps(log))
"""


def test_generator_reads_wrk_from_its_log_over_the_window_from_its_first_send(monkeypatch, tmp_path):
    fake = tmp_path / "bin" / "wrk"
    fake.parent.mkdir()
    fake.write_text(FAKE_WRK.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:{generator.os.environ['PATH']}")
    with generator.CpuSampler(every_s=0.05) as sampler:
        sampler.watch("server", generator.os.getpid())
        run = generator.run_wrk(
            sampler, "http://x", tmp_path, generator_args(warmup=0.2, duration=0.5), generator.Tool("wrk", 1)
        )
    assert run.requests_per_s == pytest.approx(1000, rel=0.01)  # one answered request per ms in [0.2, 0.7] s
    assert run.p50_ms == pytest.approx(0.5)
    assert 0 <= run.generator_cores < 0.5  # the fake sleeps


class FakeDeployment:
    endpoint = "http://127.0.0.1:9"

    def statistics(self) -> dict:
        return {
            "model_stats": [
                {
                    "inference_count": 1,
                    "execution_count": 1,
                    "inference_stats": {"compute_infer": {"count": 1, "ns": 1000}},
                }
            ]
        }


FAKE_PERF_ANALYZER = """#!{python}
import os, shutil, sys
shutil.copy(os.environ["FAKE_PROFILE"], sys.argv[sys.argv.index("--profile-export-file") + 1])
with open(sys.argv[sys.argv.index("-f") + 1], "w") as table:
    table.write("Concurrency,Inferences/Second,p50 latency,p95 latency\\n1,500,1000,1500\\n")
"""


def perf_analyzer(tmp_path: Path, monkeypatch, ran_s: float) -> PerfAnalyzer:
    """A stand-in perf_analyzer whose profile export ran `ran_s` seconds from its first send (1 request per ms)."""
    t0 = 7_000_000_000_000  # ns, its own clock
    sends = [t0 + i * 1_000_000 for i in range(int(ran_s * 1000) - 2)]
    requests = [{"timestamp": t, "response_timestamps": [t + 400_000]} for t in sends]
    profile = {"experiments": [{"requests": requests, "window_boundaries": [t0, t0 + int(ran_s * 1e9)]}]}
    (tmp_path / "profile.json").write_text(json.dumps(profile))
    monkeypatch.setenv("FAKE_PROFILE", str(tmp_path / "profile.json"))
    binary = tmp_path / "perf_analyzer"
    binary.write_text(FAKE_PERF_ANALYZER.format(python=sys.executable))
    binary.chmod(0o755)
    return PerfAnalyzer(binary, tmp_path)


def fidelity_args() -> argparse.Namespace:
    return argparse.Namespace(warmup=1.0, interval_ms=1000, stability=1000.0, max_trials=10, encoding="json")


def test_fidelity_refuses_a_perf_analyzer_run_shorter_than_its_window(tmp_path: Path, monkeypatch) -> None:
    tool = perf_analyzer(tmp_path, monkeypatch, ran_s=3.5)  # the window needs 1 s warm-up + 3 s
    m = fidelity.run_perf_analyzer(tool, FakeDeployment(), fidelity.Load(False, 1), tmp_path, fidelity_args(), tmp_path)
    assert m.stats is None
    assert m.note.startswith("no result: refused: perf_analyzer ran 3.50 s from its first send")


def test_fidelity_scores_a_full_perf_analyzer_run_over_the_window_from_its_first_send(tmp_path, monkeypatch):
    tool = perf_analyzer(tmp_path, monkeypatch, ran_s=5.0)
    m = fidelity.run_perf_analyzer(tool, FakeDeployment(), fidelity.Load(False, 1), tmp_path, fidelity_args(), tmp_path)
    assert m.stats is not None
    assert (m.stats.requests, m.stats.throughput, m.stats.p50_ms) == (3000, 1000.0, pytest.approx(0.4))


@pytest.mark.parametrize("open_loop", [False, True])
def test_fidelity_scores_ours_from_its_first_actual_send(tmp_path: Path, monkeypatch, open_loop: bool) -> None:
    result = load_result(0.5, 5.5, 5.5, late=open_loop)
    monkeypatch.setattr(fidelity, "run_load", lambda request: result)
    m = fidelity.run_ours(FakeDeployment(), fidelity.Load(open_loop, 1), [{}], fidelity_args(), tmp_path)
    log = result.requests
    late_s = log.late_us / 1e6 if log.late_us is not None else 0.0
    first = float(np.min(log.t_s + late_s))
    expected = window_stats(log.t_s + late_s, log.latency_us - late_s * 1e6, log.ok, first + 1.0, first + 4.0)
    assert m.stats == expected
    assert m.stats.requests != window_stats(log.t_s, log.latency_us, log.ok, 1.0, 4.0).requests  # not from t_s = 0


def test_fidelity_refuses_our_run_when_it_stopped_before_its_window_ended(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(fidelity, "run_load", lambda request: load_result(0.5, 4.0, 4.0))
    m = fidelity.run_ours(FakeDeployment(), fidelity.Load(False, 1), [{}], fidelity_args(), tmp_path)
    assert m.stats is None and m.note.startswith("no result: refused: ours ran 3.50 s from its first send")


def result(name: str, ipm: float, low: float, high: float) -> SimpleNamespace:
    headline = SimpleNamespace(max_invocations=ipm, ipm_interval=Interval(ipm, low, high, 3))
    return SimpleNamespace(key=name, name=name, status="ok", headline=headline)


def test_the_search_pick_is_judged_on_maxinvocations_and_says_so() -> None:
    grid = {r.key: r for r in (result("best", 150.0, 140.0, 160.0), result("close", 138.0, 130.0, 141.0))}
    grid["far"] = result("far", 100.0, 95.0, 105.0)
    assert search.compare(grid, "best", "adaptive") == "same (best)"
    assert search.compare(grid, "close", "adaptive").startswith("tied on MaxInvocations (95 % intervals overlap): ")
    assert search.compare(grid, "far", "adaptive").startswith("NOT tied on MaxInvocations (95 % intervals apart): ")


def write_configs(root: Path, batching: str) -> Path:
    (root / "models" / "model_config_4").mkdir(parents=True)
    (root / "models" / "model_config_4" / "config.pbtxt").write_text(f'name: "model"\nmax_batch_size: 8\n{batching}')
    (root / "t.csv").write_text(
        "Model,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,Satisfies Constraints,"
        "Throughput (infer/sec),p95 Latency (ms)\nmodel,1,8,model_config_4,3:CPU,8,Yes,2248.9,6.0\n"
    )
    return root


@pytest.mark.parametrize(
    ("batching", "delay", "sizes"),
    [
        ("dynamic_batching {\n}\n", 0, ()),  # quick search's own: Triton's default delay, 0 us
        (
            "dynamic_batching {\n  preferred_batch_size: 4\n  preferred_batch_size: 8\n"
            "  max_queue_delay_microseconds: 500\n}\n",
            500,
            (4, 8),
        ),
    ],
)
def test_the_peers_pick_is_measured_with_its_own_batching_settings(tmp_path: Path, batching, delay, sizes) -> None:
    root = write_configs(tmp_path, batching)
    found = peer_model_analyzer._pick(1.0, root / "t.csv", root / "models")
    assert (found.dynamic_batching, found.queue_delay_us, found.preferred_batch_sizes) == (True, delay, sizes)
    spec_path = search.write_spec(tmp_path, "grid", {**search.QUICK, **search.peer_choice(found)}, 100.0, "pick")
    spec = load_spec(spec_path)
    (measured,) = expand_candidates(spec)  # what our protocol's run of the pick measures
    assert measured.key == search.peer_candidate(found, spec).key
    assert measured.dynamic_batching is not None
    assert (measured.dynamic_batching.max_queue_delay_microseconds, measured.instance_group_count) == (delay, 3)


def test_the_peers_version_is_asked_of_the_tool(tmp_path: Path, monkeypatch) -> None:
    fake = tmp_path / "ma" / "bin" / "model-analyzer"
    fake.parent.mkdir(parents=True)
    fake.write_text('#!/bin/sh\n[ "$1" = --version ] && echo 1.99.0\n')
    fake.chmod(0o755)
    monkeypatch.setattr(peer_model_analyzer, "PEERS", tmp_path)
    assert peer_model_analyzer.version() == "1.99.0"


@pytest.fixture
def peer_installed(tmp_path: Path, monkeypatch) -> Path:
    """search.side_by_side's surroundings: an installed peer, a model repository, a grid spec."""
    (tmp_path / "ma").mkdir()
    (tmp_path / "ma" / "model-analyzer").touch()
    monkeypatch.setattr(peer_model_analyzer, "executable", lambda: tmp_path / "ma" / "model-analyzer")
    monkeypatch.setattr(peer_model_analyzer, "version", lambda: "1.58.0", raising=False)
    monkeypatch.setattr(search, "write_model_repository", lambda *args, **kwargs: tmp_path / "repository")
    return search.write_spec(tmp_path, "grid", search.QUICK, 100.0)


def test_a_peer_that_fails_is_recorded_with_its_error_and_the_benchmark_goes_on(
    tmp_path: Path, monkeypatch, capsys, peer_installed: Path
) -> None:
    def fails(*args, **kwargs):
        raise RuntimeError("model-analyzer profile exited 1:\nno GPU | config rejected")

    monkeypatch.setattr(peer_model_analyzer, "quick_search", fails)
    search.side_by_side(tmp_path, peer_installed, None, 100.0, [], search.QUICK)
    out = capsys.readouterr().out
    assert (
        "| Model Analyzer 1.58.0 quick | failed | | | | RuntimeError: model-analyzer profile exited 1: no GPU / " in out
    )


def test_a_failed_run_of_the_peers_pick_is_recorded_and_the_benchmark_goes_on(
    tmp_path: Path, monkeypatch, capsys, peer_installed: Path
) -> None:
    root = write_configs(tmp_path, "dynamic_batching {\n}\n")
    monkeypatch.setattr(
        peer_model_analyzer,
        "quick_search",
        lambda *a, **k: peer_model_analyzer._pick(206.0, root / "t.csv", root / "models"),
    )
    monkeypatch.setattr(search, "decided", lambda url, spec: {"grid-best": result("grid-best", 150.0, 140.0, 160.0)})

    def fails(folder, spec, number):
        raise search.RunFailed("recommender run model-analyzer-pick.yaml failed (exit 1)")

    monkeypatch.setattr(search, "run_once", fails)
    search.side_by_side(tmp_path, peer_installed, None, 100.0, ["sqlite:///grid-1.db"], search.QUICK)
    out = capsys.readouterr().out
    assert "pt-db-ig3-mbs8, queue delay 0 us at concurrency 8" in out
    assert "| failed: our run of its pick: recommender run model-analyzer-pick.yaml failed (exit 1) |" in out
