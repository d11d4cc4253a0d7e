"""A real AIPerf run against a real Infinity server, imported, ranked and reported; its counts and latencies checked
against AIPerf's own aggregate JSON; the stored run exported in AIPerf's format and read by AIPerf's own record
model."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

from recommender.importers.aiperf import read_aiperf
from recommender.modelrepo.model_source import minilm_dir
from recommender.store.results import ResultStore
from tests.infinity_server import SERVED_NAME
from tests.processes import stop_group
from tests.unit.test_aiperf_records import cli

pytestmark = pytest.mark.aiperf
REQUESTS, CONCURRENCY = 400, 2


def profile(aiperf: Path, url: str, out: Path) -> None:
    """`aiperf profile` with a bounded request count: it stops by itself."""
    command = [str(aiperf), "profile", "--model", SERVED_NAME, "--url", url, "--endpoint-type", "embeddings"]
    command += ["--custom-endpoint", "/embeddings", "--tokenizer", str(minilm_dir()), "--artifact-dir", str(out)]
    command += ["--request-count", str(REQUESTS), "--concurrency", str(CONCURRENCY), "--ui", "none"]
    command += ["--no-gpu-telemetry", "--no-server-metrics", "--prompt-input-tokens-mean", "32", "--random-seed", "1"]
    log = out.parent / "aiperf.log"
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            assert process.wait(timeout=180) == 0, log.read_text()[-3000:]
        finally:
            stop_group(process)


def test_a_real_aiperf_run_is_imported_ranked_reported_and_exported(
    aiperf_binary: Path, infinity_url: str, tmp_path: Path
) -> None:
    out = tmp_path / "aiperf-c2"
    profile(aiperf_binary, infinity_url, out)
    aggregate = json.loads((out / "profile_export_aiperf.json").read_text())
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", str(tmp_path / "runs")
    options = ["--db", db, "--run-dir", runs, "--instance-type", "ml.c5.xlarge", "--price-per-hour", "0.204"]
    assert cli("import", "aiperf", str(out), "--experiment", "infinity", *options) == 0

    # counts and latencies against AIPerf's own aggregate
    run = read_aiperf(out)
    answered = run.records.latency_us[run.records.ok] / 1e3
    assert len(run.records) == aggregate["completed_request_count"]["avg"] == REQUESTS
    assert len(answered) == aggregate["request_count"]["avg"] == aggregate["request_latency"]["count"]
    ours = {"avg": np.mean(answered), "min": answered.min(), "max": answered.max()}
    ours |= {f"p{p}": np.percentile(answered, p) for p in (50, 90, 99)}
    for name, figure in ours.items():
        assert figure == pytest.approx(aggregate["request_latency"][name], abs=1e-3), name  # to the microsecond
    stored = ResultStore.open(db).results("infinity")[0]
    assert stored.headline is not None and stored.headline.requests == REQUESTS
    windows = ResultStore.open(db).windows(stored.run_id or 0)
    assert sum(w.requests for w in windows) <= REQUESTS and len(windows) == 10
    assert stored.headline.max_invocations == pytest.approx(
        aggregate["request_throughput"]["avg"] * 60, rel=0.15
    )  # windows vs the whole run

    # ranked, costed and reported like a measured run
    report = tmp_path / "report.md"
    assert cli("report", "infinity", "--db", db, "--out", str(report)) == 0
    text = report.read_text()
    assert "## Ranked configurations" in text and "ml.c5.xlarge" in text
    assert "**recommendation**: none" not in text

    # exported in AIPerf's format, read back by AIPerf's own record model
    exported = tmp_path / "exported"
    assert cli("export", "infinity", "--format", "aiperf", "--out", str(exported), "--db", db) == 0
    assert [folder.name for folder in exported.iterdir()] == [f"01-concurrency-{CONCURRENCY}-repeat-1"]
    exported = exported / f"01-concurrency-{CONCURRENCY}-repeat-1"  # one level, one repeat: one AIPerf folder
    python = aiperf_binary.parent / "python"
    check = (
        "import sys\nfrom aiperf.common.models.record_models import MetricRecordInfo\n"
        "rs = [MetricRecordInfo.model_validate_json(line) for line in open(sys.argv[1])]\n"
        "print(len(rs), sum(r.error is None for r in rs))\n"
    )
    done = subprocess.run(
        [str(python), "-c", check, str(exported / "profile_export.jsonl")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == [str(REQUESTS), str(len(answered))]
    again = read_aiperf(exported).records
    assert again.latency_us.tolist() == run.records.latency_us.tolist()
