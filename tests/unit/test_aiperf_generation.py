"""AIPerf's generative runs both ways: streamed chat and completions runs AIPerf 0.13.0 wrote against vLLM
(tests/data/aiperf/README.md) read with their token-level records, stored as a generative run, exported as records
AIPerf's own record model validates, and read back to the microsecond; bad token records refused by name."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from recommender.errors import InputError
from recommender.importers.aiperf import CONCURRENCY, RATE, Load, read_aiperf, read_records, write_aiperf
from recommender.metrics.records import RequestLog
from recommender.store.results import ResultStore
from tests.unit.test_aiperf_records import cli

DATA = Path(__file__).parents[1] / "data" / "aiperf"
ROOT = Path(__file__).resolve().parents[2]
AIPERF_PYTHON = ROOT / ".venvs" / "aiperf" / "bin" / "python"
RECORDS, AGGREGATE = "profile_export.jsonl", "profile_export_aiperf.json"


def aiperf_records(folder: Path) -> list[dict]:
    """AIPerf's records in send order (the order the reader keeps)."""
    records = [json.loads(line) for line in (folder / RECORDS).read_text().splitlines()]
    return sorted(records, key=lambda r: r["metadata"]["request_start_ns"])


@pytest.mark.parametrize(
    ("name", "protocol", "path"),
    [("chat-c2-24", "openai-chat", "/v1"), ("completions-c2-24", "openai-completions", "/v1")],
)
def test_a_streamed_run_is_read_with_its_token_records(name: str, protocol: str, path: str) -> None:
    run = read_aiperf(DATA / name)
    log, records = run.records, aiperf_records(DATA / name)
    assert log.generative and run.protocol == protocol
    assert run.base_url == run.url + path  # AIPerf's default /v1/chat/completions (or /v1/completions)
    assert len(log) == len(records) == 24 and log.failures == 0 and bool(np.all(log.finished))
    assert not np.any(log.tokens_counted)  # the run had --use-server-token-count: the server's usage
    for row, record in enumerate(records):
        metrics = record["metrics"]
        assert log.ttft_us[row] == round(metrics["time_to_first_token"]["value"] * 1000)
        assert log.input_tokens[row] == metrics["input_sequence_length"]["value"]
        assert log.output_tokens[row] == metrics["output_sequence_length"]["value"] == 16
        chunks = log.chunk_times_us(row)
        gaps = metrics["inter_chunk_latency"]["value"]
        assert len(chunks) == len(gaps) + 1 and chunks[0] == log.ttft_us[row]
        assert np.abs(np.diff(chunks) - np.array(gaps) * 1000).max() <= 1  # each gap, to the microsecond
        assert chunks[-1] <= log.latency_us[row]
    aggregate = json.loads((DATA / name / AGGREGATE).read_text())
    ttft_ms, latency_ms = log.ttft_us / 1e3, log.latency_us / 1e3
    itl_ms = (latency_ms - ttft_ms) / (log.output_tokens - 1)  # AIPerf's inter_token_latency per request
    for figure, ours in [("time_to_first_token", ttft_ms), ("inter_token_latency", itl_ms)]:
        for stat in ("p50", "p95", "avg"):
            theirs = aggregate[figure][stat]
            mine = np.mean(ours) if stat == "avg" else np.percentile(ours, int(stat[1:]))
            assert mine == pytest.approx(theirs, abs=2e-3), (figure, stat)  # ours is rounded to the us
    assert int(log.output_tokens.sum()) == aggregate["total_osl"]["avg"]


def test_a_chat_run_is_stored_as_a_generative_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "runs"
    assert (
        cli("import", "aiperf", str(DATA / "chat-c2-24"), "--experiment", "chat", "--db", db, "--run-dir", str(runs))
        == 0
    )
    said = " ".join(capsys.readouterr().out.split())
    assert "(AIPerf 0.13.0, chat, concurrency 2) stored as experiment chat (protocol openai-chat)" in said
    store = ResultStore.open(db)
    (experiment,) = store.experiments()
    target = experiment.spec["target"]
    assert (target["kind"], target["protocol"], target["model"]) == ("remote", "openai-chat", "tiny-llama")
    assert target["endpoint"].endswith("/v1")
    (npz,) = runs.rglob("load.npz")
    stored = RequestLog.from_npz(npz)
    assert stored.generative and len(stored) == 24
    chunks = sum(len(r["metrics"]["inter_chunk_latency"]["value"]) + 1 for r in aiperf_records(DATA / "chat-c2-24"))
    assert stored.chunk_us is not None and len(stored.chunk_us) == chunks
    result = store.results("chat")[0]
    assert result.headline is not None and result.headline.requests == 24


def test_a_generative_run_goes_out_as_aiperf_records_and_comes_back_to_the_microsecond(tmp_path: Path) -> None:
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", str(tmp_path / "runs")
    folder = tmp_path / "completions"
    shutil.copytree(DATA / "completions-c2-24", folder)
    assert cli("import", "aiperf", str(folder), "--experiment", "gen", "--db", db, "--run-dir", runs) == 0
    out = tmp_path / "exported"
    assert cli("export", "gen", "--format", "aiperf", "--out", str(out), "--db", db) == 0
    (level,) = out.iterdir()
    aggregate = json.loads((level / AGGREGATE).read_text())
    assert aggregate["input_config"]["endpoint"]["type"] == "completions"
    again, original = read_aiperf(level), read_aiperf(DATA / "completions-c2-24")
    assert again.protocol == "openai-completions" and again.base_url == original.base_url
    for name in ("latency_us", "ttft_us", "input_tokens", "output_tokens", "finished", "chunk_count", "chunk_us"):
        assert getattr(again.records, name).tolist() == getattr(original.records, name).tolist(), name
    assert aggregate["time_to_first_token"]["p95"] == pytest.approx(np.percentile(original.records.ttft_us / 1e3, 95))


def generative_log(rng: np.random.Generator, count: int) -> RequestLog:
    """`count` streamed answers of 1 to 12 chunks, a few failed (no token), some with counted tokens."""
    chunks = rng.integers(1, 13, count)
    ok = rng.uniform(size=count) > 0.1
    chunks[~ok] = 0
    ttft = np.where(ok, rng.integers(5_000, 90_000, count), -1)
    times = [t + np.cumsum(np.r_[0, rng.integers(0, 20_000, n - 1)]) for t, n in zip(ttft, chunks, strict=True) if n]
    flat = np.concatenate(times)
    ends = np.array([times_row[-1] for times_row in times])
    latency = np.full(count, 100_000)
    latency[ok] = ends + rng.integers(0, 3_000, len(ends))
    return RequestLog(
        t_s=np.sort(rng.uniform(0, 10, count)),
        latency_us=latency,
        ok=ok,
        users=np.full(count, 4),
        ttft_us=ttft,
        input_tokens=rng.integers(1, 500, count),
        output_tokens=chunks,
        tokens_counted=np.zeros(count, dtype=bool),
        finished=ok,
        chunk_start=np.r_[0, np.cumsum(chunks)[:-1]],
        chunk_count=chunks,
        chunk_us=flat,
    )


@pytest.mark.skipif(not AIPERF_PYTHON.exists(), reason="no AIPerf here: bash scripts/tool_venvs.sh aiperf")
def test_every_exported_chat_record_is_valid_to_aiperfs_own_record_model(tmp_path: Path) -> None:
    log = generative_log(np.random.default_rng(5), 300)
    log = RequestLog(**{**{n: getattr(log, n) for n in log.__dataclass_fields__}, "t_s": log.t_s - log.t_s[0]})
    write_aiperf(tmp_path, log, 1_795_000_000.5, "tiny-llama", "http://127.0.0.1:1/v1", Load(CONCURRENCY, 4), "chat")
    check = (
        "import sys\nfrom aiperf.common.models.record_models import MetricRecordInfo\n"
        "rs = [MetricRecordInfo.model_validate_json(line) for line in open(sys.argv[1])]\n"
        "print(len(rs), sum(r.error is None for r in rs), sum('time_to_first_token' in r.metrics for r in rs))\n"
    )
    done = subprocess.run(
        [str(AIPERF_PYTHON), "-c", check, str(tmp_path / RECORDS)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    answered = int(np.count_nonzero(log.ok))
    assert done.stdout.split() == ["300", str(answered), str(answered)]
    again = read_aiperf(tmp_path).records
    assert again.chunk_us is not None and again.chunk_us.tolist() == log.chunk_us.tolist()
    assert again.ttft_us.tolist() == log.ttft_us.tolist() and again.ok.tolist() == log.ok.tolist()


def damaged(tmp_path: Path, line: int, change) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(DATA / "chat-c2-24", folder)
    lines = (folder / RECORDS).read_text().splitlines()
    record = json.loads(lines[line - 1])
    change(record)
    lines[line - 1] = json.dumps(record)
    (folder / RECORDS).write_text("\n".join(lines) + "\n")
    return folder


def test_a_failed_chat_request_is_a_failure_without_tokens(tmp_path: Path) -> None:
    def fail(record: dict) -> None:
        record["metrics"] = {"error_isl": {"value": 62, "unit": "tokens"}}
        record["error"] = {"type": "TimeoutError", "message": "TimeoutError()"}

    run = read_aiperf(damaged(tmp_path, 5, fail))
    failed = np.flatnonzero(~run.records.ok)
    assert len(failed) == 1 and not run.records.finished[failed[0]]
    assert run.records.ttft_us[failed[0]] == -1 and run.records.chunk_count[failed[0]] == 0


@pytest.mark.parametrize(
    ("field", "value", "expected"),
    [
        ("inter_chunk_latency", {"value": [1.0, -2.0], "unit": "ms"}, "field metrics.inter_chunk_latency is"),
        ("inter_chunk_latency", {"value": "1,2", "unit": "ms"}, "a list of gaps from 0"),
        ("time_to_first_token", {"value": "fast", "unit": "ms"}, "field metrics.time_to_first_token is"),
        ("output_sequence_length", {"value": 2.5, "unit": "tokens"}, "metrics.output_sequence_length is"),
        ("input_sequence_length", {"value": 10**12, "unit": "tokens"}, "a whole number of tokens"),
    ],
)
def test_a_bad_token_record_is_one_line_naming_the_line_and_field(
    tmp_path: Path, field: str, value: object, expected: str
) -> None:
    folder = damaged(tmp_path, 3, lambda record: record["metrics"].__setitem__(field, value))
    with pytest.raises(InputError, match=expected) as raised:
        read_aiperf(folder)
    assert "profile_export.jsonl: line 3" in raised.value.message and "\n" not in raised.value.message


def test_a_rate_run_is_read_as_records_for_a_benchmark_not_stored(tmp_path: Path) -> None:
    log = generative_log(np.random.default_rng(8), 40)
    log = RequestLog(**{**{n: getattr(log, n) for n in log.__dataclass_fields__}, "t_s": log.t_s - log.t_s[0]})
    write_aiperf(tmp_path, log, 1_795_000_000.0, "tiny-llama", "http://127.0.0.1:1/v1", Load(RATE, 4.0), "chat")
    with pytest.raises(InputError, match="an open-loop"):
        read_aiperf(tmp_path)
    records = read_records(tmp_path)
    assert records.generative and records.ttft_us.tolist() == log.ttft_us.tolist()
    assert records.chunk_us is not None and records.chunk_us.tolist() == log.chunk_us.tolist()


def test_a_clean_end_without_a_token_is_finished_but_a_failure(tmp_path: Path) -> None:
    def empty(record: dict) -> None:
        for name in ("time_to_first_token", "inter_chunk_latency", "inter_token_latency"):
            record["metrics"].pop(name)
        record["metrics"]["output_sequence_length"]["value"] = 0

    run = read_aiperf(damaged(tmp_path, 4, empty))
    (failed,) = np.flatnonzero(~run.records.ok)
    assert run.records.finished[failed] and run.records.ttft_us[failed] == -1
    assert run.records.chunk_count[failed] == 0 and run.records.output_tokens[failed] == 0
