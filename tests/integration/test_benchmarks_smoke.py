"""Smoke tests of the benchmark scripts: they run end to end in quick mode and print a verdict (not a figure check)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_script(name: str, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCHMARKS / name), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("name", ["generator.py", "fidelity.py", "soak.py", "search.py"])
def test_help_describes_the_benchmark(name: str) -> None:
    done = run_script(name, "--help", timeout=60)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (apt-get install -y wrk)")
def test_generator_quick_prints_both_tools_and_a_verdict() -> None:
    done = run_script("generator.py", "--quick", timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "| ours (Locust driver)" in done.stdout and "| wrk -t1" in done.stdout
    assert re.search(r"requests/s per core -> (PASS|FAIL) \(median [\d,]+\)", done.stdout)
    rows = [line for line in done.stdout.splitlines() if line.startswith("| ours") or line.startswith("| wrk")]
    assert all(line.rstrip(" |").endswith("| 0") for line in rows), rows  # no failed requests against the null endpoint


def test_fidelity_without_downloads_runs_or_says_what_is_missing(tmp_path: Path) -> None:
    """Offline-safe: with --no-download the script either finds perf_analyzer set up or names what is missing (exit 2)."""
    from benchmarks.perf_analyzer_tool import ToolMissing, ensure_perf_analyzer

    try:
        ensure_perf_analyzer(download=False)
    except ToolMissing:
        done = run_script("fidelity.py", "--quick", "--no-download", "--work-dir", str(tmp_path), timeout=60)
        assert done.returncode == 2
        assert "perf_analyzer is not set up" in done.stderr
        return
    pytest.skip("perf_analyzer is set up here; the full fidelity run is `python benchmarks/fidelity.py --quick` (minutes, real Triton)")


@pytest.mark.slow
def test_soak_quick_ends_without_orphans_lost_rows_or_missing_candidates(tmp_path: Path) -> None:
    done = run_script("soak.py", "--quick", "--workdir", str(tmp_path), timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "round: SIGTERM exit 143, resume exit 0, orphans 0, running rows 0" in done.stdout and "soak -> PASS" in done.stdout


@pytest.mark.slow
def test_search_quick_races_and_prints_ratio_and_pick_verdicts(tmp_path: Path) -> None:
    done = run_script("search.py", "--quick", "--work-dir", str(tmp_path), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"wall-time ratio <= 0.4 in every run -> (PASS|FAIL) \(max \d+\.\d\d\)", done.stdout)
    assert re.search(r"grid's best in every run -> (PASS|FAIL)", done.stdout)
    assert re.search(r"^\| 1 \| \d+ \| \d+ \| \d\.\d\d \| \d+ full, \d+ pruned \| (same|tied|NOT tied|n/a|unknown)", done.stdout, re.M)
