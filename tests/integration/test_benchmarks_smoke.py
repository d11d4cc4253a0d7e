"""Smoke tests of the benchmark scripts: they run end to end in quick mode and print a verdict (not a figure check).
Every test but fidelity's and search's shares the host (marker `shares_host`): a verdict may be PASS or FAIL;
fidelity's asks for a stable measurement, and search's races, whose work grows with the host's noise: they run alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.perf_analyzer_tool import PerfAnalyzer, ToolMissing, ensure_perf_analyzer

pytestmark = pytest.mark.integration
shares_host = pytest.mark.shares_host

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True, timeout=timeout
    )


@shares_host
@pytest.mark.parametrize(
    "name",
    ["generator.py", "generator_stream.py", "fidelity.py", "soak.py", "search.py", "deploy_cost.py", "padding.py"],
)
def test_help_describes_the_benchmark(name: str) -> None:
    done = run_script(name, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


@shares_host
@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install -y wrk)")
def test_generator_quick_prints_both_tools_and_a_verdict() -> None:
    done = run_script("generator.py", "--quick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    for tool in ("ours, FastHttpUser", "ours, raw geventhttpclient", "wrk -t1"):
        assert f"| {tool} " in done.stdout and f"| {tool}, c=1 " in done.stdout  # loaded and at concurrency 1
    for client in ("FastHttpUser", "raw geventhttpclient"):
        assert re.search(
            rf"target: {client} >= 5,000 requests/s per core -> (PASS|FAIL) \(median [\d,]+\)", done.stdout
        )
        assert re.search(rf"target: {client} adds <= 0.3 ms at c=1 -> (PASS|FAIL) \([+-][\d.]+ ms\)", done.stdout)
    rows = [line for line in done.stdout.splitlines() if line.startswith(("| ours", "| wrk")) and line.count("|") == 8]
    assert len(rows) == 3  # the throughput table: two clients and wrk
    assert all(line.rstrip(" |").endswith("| 0") for line in rows), rows  # no failed requests against the null endpoint


@shares_host
def test_generator_stream_quick_prints_the_cost_per_token_and_a_verdict() -> None:
    done = run_script("generator_stream.py", "--quick", timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(
        r"target: <= 0.1 core per 1,000 tokens/s at 1,000 tokens/s -> (PASS|FAIL) \(median [\d.]+\)", done.stdout
    )
    (row,) = [line for line in done.stdout.splitlines() if line.startswith("| 1,000 ")]
    assert row.rstrip(" |").endswith("| 0")  # no failed generation against the stand-in


@pytest.fixture(scope="module")
def perf_analyzer() -> PerfAnalyzer:
    """perf_analyzer set up the way fidelity.py sets it up (benchmarks/perf_analyzer_tool.py: the tritonclient 2.51
    wheel downloaded and its binary unzipped into benchmarks/.tools, nothing installed; libb64-0d from
    scripts/install_system_packages.sh); skipped with the reason when a piece cannot be had (e.g. offline)."""
    try:
        return ensure_perf_analyzer(download=True)
    except ToolMissing as missing:
        pytest.skip(f"perf_analyzer is not set up: {missing}")


@pytest.mark.parametrize("payload", ["fixed", "variable"])
def test_fidelity_quick_compares_closed_and_open_loop(perf_analyzer: PerfAnalyzer, tmp_path: Path, payload) -> None:
    """Both tools against a real Triton at c=1, c=4 and one open-loop rate, a verdict per figure, on the fixed
    payload and on variable-length bodies (perf_analyzer's --input-data with a shape per entry). (Without
    perf_analyzer the script names what is missing and exits 2: tests/unit/test_benchmark_scoring.py.)"""
    done = run_script(
        "fidelity.py", "--quick", "--no-download", "--payload", payload, "--work-dir", str(tmp_path), timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    for heading in ("### c=1", "### c=4", "### open loop "):
        assert heading in done.stdout
    assert len(re.findall(r"\| throughput \(inf/s\) .*\| (PASS|FAIL) +\|", done.stdout)) == 3, done.stdout[-3000:]
    assert "no stable measurement" not in done.stdout
    assert ("variable-length payload" in done.stdout) is (payload == "variable")


@shares_host
@pytest.mark.slow
def test_padding_quick_ranks_every_padding_and_judges_the_target(tmp_path: Path) -> None:
    done = run_script("padding.py", "--quick", "--work-dir", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "generated from a log-normal token-length distribution" in done.stdout
    for padding in ("max", "buckets", "none"):
        assert re.search(rf"^\| \d+ \| pt-\S+ \| {padding} \| (on|off) \| [\d,]+ \| [\d,]+ \|", done.stdout, re.M), (
            padding
        )
    assert re.search(r"^recommended: pt-", done.stdout, re.M)
    assert re.search(r"MaxInvocations of the best padding max candidate -> (PASS|FAIL) \([\d.]+x", done.stdout)


@shares_host
def test_soak_quick_ends_without_orphans_lost_rows_or_missing_candidates(tmp_path: Path) -> None:
    done = run_script("soak.py", "--quick", "--workdir", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "round: SIGTERM exit 143, resume exit 0, orphans 0, running rows 0" in done.stdout
        and "soak -> PASS" in done.stdout
    )


@pytest.mark.slow  # alone: its racing does more work on a busy host (346 s beside the other stream, 100 s alone)
def test_search_quick_races_and_prints_ratio_and_pick_verdicts(tmp_path: Path) -> None:
    done = run_script("search.py", "--quick", "--work-dir", str(tmp_path), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"wall-time ratio <= 0.4 in every run -> (PASS|FAIL) \(max \d+\.\d\d\)", done.stdout)
    assert re.search(r"grid's best in every run -> (PASS|FAIL)", done.stdout)
    assert re.search(
        r"^\| 1 \| \d+ \| \d+ \| n/a \| \d\.\d\d \| \d+ full, \d+ pruned \| (same|tied|NOT tied|n/a|unknown)",
        done.stdout,
        re.M,
    )


@shares_host
def test_deploy_cost_quick_times_a_cold_start_against_a_load_on_a_running_server() -> None:
    """The real tritonserver, both ways, one round: the three figures and the ratio printed (not a figure check)."""
    done = run_script("deploy_cost.py", "--quick", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    figures = r"cold \d+\.\d\d s, server \d+\.\d\d s, load \d+\.\d\d s"
    assert re.search(rf"^round 1, pt-db-ig1-mbs16@0: {figures}$", done.stdout, re.M), done.stdout
    assert re.search(r"a warm server would leave load / cold = \d+\.\d\d of a deployment", done.stdout)


@shares_host
def test_deploy_cost_names_an_unknown_candidate_and_exits_2() -> None:
    done = run_script("deploy_cost.py", "--candidates", "pt-db-ig9-mbs3@7", timeout=60)
    assert done.returncode == 2 and "no candidate pt-db-ig9-mbs3@7" in done.stderr and "Traceback" not in done.stderr
