"""AIPerf's record format both ways: the parser on files AIPerf 0.13.0 wrote (tests/data/aiperf/README.md), the writer,
bad input, and a stored run exported in AIPerf's format and imported back."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from recommender.cli import main
from recommender.errors import InputError
from recommender.importers.aiperf import CONCURRENCY, Load, read_aiperf, write_aiperf
from recommender.metrics.records import RequestLog
from recommender.store.results import ResultStore

DATA = Path(__file__).parents[1] / "data" / "aiperf"


def aiperf_latencies_us(folder: Path) -> list[int]:
    """AIPerf's own per-request latency of each answered request, in us (ns exact in its records)."""
    records = [json.loads(line) for line in (folder / "profile_export.jsonl").read_text().splitlines()]
    return sorted(round(r["metrics"]["request_latency"]["value"] * 1000) for r in records if "error" not in r)


def test_reads_what_aiperf_wrote() -> None:
    run = read_aiperf(DATA / "c2-80")
    aggregate = json.loads((DATA / "c2-80" / "profile_export_aiperf.json").read_text())
    assert len(run.records) == aggregate["request_count"]["avg"] == 80
    assert run.records.failures == 0
    assert sorted(run.records.latency_us.tolist()) == aiperf_latencies_us(DATA / "c2-80")
    latency_ms = run.records.latency_us / 1e3
    for name, figure in [("avg", np.mean(latency_ms)), ("p50", np.median(latency_ms)), ("max", latency_ms.max())]:
        assert figure == pytest.approx(aggregate["request_latency"][name], abs=1e-3)  # to the microsecond
    assert (run.concurrency, run.model, run.endpoint_path) == (2, "minilm", "/embeddings")
    assert run.records.t_s[0] == 0 and np.all(np.diff(run.records.t_s) >= 0)
    assert run.duration_s == pytest.approx(aggregate["benchmark_duration"]["avg"], abs=0.05)


def test_failed_requests_are_failures_timed_send_to_failure() -> None:
    run = read_aiperf(DATA / "timeouts-40")
    aggregate = json.loads((DATA / "timeouts-40" / "profile_export_aiperf.json").read_text())
    assert run.records.failures == aggregate["error_request_count"]["avg"] == 34
    assert int(np.count_nonzero(run.records.ok)) == aggregate["request_count"]["avg"] == 6
    records = [json.loads(line) for line in (DATA / "timeouts-40" / "profile_export.jsonl").read_text().splitlines()]
    timed_out = sorted(
        round((r["metadata"]["request_end_ns"] - r["metadata"]["request_start_ns"]) / 1e3)
        for r in records
        if "error" in r
    )
    assert sorted(run.records.latency_us[~run.records.ok].tolist()) == timed_out
    assert min(timed_out) > 70_000  # about the 80 ms timeout (AIPerf's clock starts before the send)


def test_written_records_read_back_to_the_microsecond(tmp_path: Path) -> None:
    rng = np.random.default_rng(3)
    log = RequestLog(
        t_s=np.sort(rng.uniform(0, 20, 500)),
        latency_us=rng.integers(1_000, 90_000, 500),
        ok=rng.uniform(size=500) > 0.05,
        users=np.full(500, 3),
    )
    log = RequestLog(log.t_s - log.t_s[0], log.latency_us, log.ok, log.users)
    write_aiperf(
        tmp_path, log, 1_795_000_000.123456, "minilm", "http://127.0.0.1:1", Load(CONCURRENCY, 3), "embeddings"
    )
    run = read_aiperf(tmp_path)
    assert len(run.records) == 500 and run.concurrency == 3
    assert run.records.latency_us.tolist() == log.latency_us.tolist()
    assert run.records.ok.tolist() == log.ok.tolist()
    assert np.abs(run.records.t_s - log.t_s).max() < 1e-6
    aggregate = json.loads((tmp_path / "profile_export_aiperf.json").read_text())
    answered = log.latency_us[log.ok] / 1e3
    assert aggregate["request_latency"]["p99"] == pytest.approx(np.percentile(answered, 99))
    assert aggregate["error_request_count"]["avg"] == log.failures


def broken(tmp_path: Path, line: int | None = None, schema: str | None = None, drop: str | None = None) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(DATA / "c2-80", folder)
    if line is not None:
        lines = (folder / "profile_export.jsonl").read_text().splitlines()
        lines[line - 1] = lines[line - 1][:40]
        (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    if schema is not None:
        aggregate = json.loads((folder / "profile_export_aiperf.json").read_text())
        (folder / "profile_export_aiperf.json").write_text(json.dumps(aggregate | {"schema_version": schema}))
    if drop is not None:
        (folder / drop).unlink()
    return folder


@pytest.mark.parametrize(
    ("damage", "expected"),
    [
        ({"drop": "profile_export.jsonl"}, "profile_export.jsonl: no such file"),
        ({"drop": "profile_export_aiperf.json"}, "profile_export_aiperf.json: no such file"),
        ({"line": 7}, "profile_export.jsonl: line 7, column 30: not valid JSON"),
        ({"schema": "2.0"}, "schema_version '2.0'"),
    ],
)
def test_bad_input_is_one_line_naming_the_file(tmp_path: Path, damage: dict, expected: str) -> None:
    with pytest.raises(InputError, match=expected) as raised:
        read_aiperf(broken(tmp_path, **damage))
    assert raised.value.hint
    assert "\n" not in raised.value.message


def test_a_record_without_its_send_time_names_the_field(tmp_path: Path) -> None:
    folder = broken(tmp_path)
    lines = (folder / "profile_export.jsonl").read_text().splitlines()
    record = json.loads(lines[2])
    del record["metadata"]["request_start_ns"]
    lines[2] = json.dumps(record)
    (folder / "profile_export.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line 3: field metadata.request_start_ns missing"):
        read_aiperf(folder)


def cli(*args: str) -> int:
    try:
        main(list(args))
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def test_bad_folder_exits_2_and_stores_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = f"sqlite:///{tmp_path / 'r.db'}"
    assert cli("import", "aiperf", str(broken(tmp_path, line=2)), "--db", db, "--run-dir", str(tmp_path)) == 2
    error = "".join(capsys.readouterr().err.split())  # the console wraps long lines
    assert "profile_export.jsonl:line2,column" in error and "notvalidJSON" in error and "Traceback" not in error
    assert ResultStore.open(db).experiments() == []


def test_import_export_import_keeps_every_request_to_the_microsecond(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", str(tmp_path / "runs")
    options = ["--db", db, "--run-dir", runs, "--price-per-hour", "0.5", "--instance-type", "ml.c5.xlarge"]
    assert cli("import", "aiperf", str(DATA / "c2-80"), "--experiment", "first", *options) == 0
    assert cli("import", "aiperf", str(DATA / "c2-80"), "--experiment", "first", *options) == 0  # again: nothing
    assert "nothingstored" in "".join(capsys.readouterr().out.split())
    store = ResultStore.open(db)
    assert len(list(store.runs("first"))) == 1
    out = tmp_path / "exported"
    assert cli("export", "first", "--format", "aiperf", "--out", str(out), "--db", db) == 0
    assert [p.name for p in out.iterdir()] == ["01-concurrency-2-repeat-1"]  # one level, one repeat
    out = out / "01-concurrency-2-repeat-1"
    assert cli("import", "aiperf", str(out), "--experiment", "second", *options) == 0
    original, again = read_aiperf(DATA / "c2-80").records, read_aiperf(out).records
    assert len(again) == len(original) == 80
    assert again.latency_us.tolist() == original.latency_us.tolist()
    assert np.abs(again.t_s - original.t_s).max() < 1e-6
    first, second = store.results("first")[0], store.results("second")[0]
    assert first.headline is not None and second.headline is not None
    assert second.headline.requests == first.headline.requests == 80
    assert second.headline.max_invocations == pytest.approx(first.headline.max_invocations)


def test_another_import_into_an_experiment_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, runs = f"sqlite:///{tmp_path / 'r.db'}", str(tmp_path / "runs")
    assert cli("import", "aiperf", str(DATA / "c2-80"), "--experiment", "one", "--db", db, "--run-dir", runs) == 0
    assert cli("import", "aiperf", str(DATA / "timeouts-40"), "--experiment", "one", "--db", db, "--run-dir", runs) == 2
    assert "alreadyholdsotherruns" in "".join(capsys.readouterr().err.split())
    assert len(list(ResultStore.open(db).runs("one"))) == 1
