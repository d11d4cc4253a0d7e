"""AIPerf's record format, both ways: an AIPerf artifact folder read into a request log, a request log written as one.

    read_aiperf(folder) -> AiperfRun        profile_export.jsonl (one record per request) + profile_export_aiperf.json
    write_aiperf(folder, run) -> [paths]    the same two files, as AIPerf 0.13.0 writes them for an embeddings run

Read: each profiling record's request_start_ns (send time) and request_latency (ms, as AIPerf times it: from the send
to the last byte; request_end_ns - request_start_ns for a failed request, which has none), a record with an `error`
or cancelled is a failure; the aggregate JSON gives the version, the
model, the URL, the concurrency and the duration. Only closed-loop (concurrency) runs map onto a load level here.
Written: what recommender knows per request (send time, latency, success) in AIPerf's fields; token counts are not
known per request and are left out, output_sequence_length is 0 (an embeddings run has no output tokens).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from recommender.errors import InputError
from recommender.metrics.records import RequestLog

RECORDS_FILE = "profile_export.jsonl"
AGGREGATE_FILE = "profile_export_aiperf.json"
SCHEMA_VERSION = "1.4"  # profile_export_aiperf.json's schema_version as AIPerf 0.13.0 writes it
AIPERF_VERSION = "0.13.0"
PROFILING = "profiling"  # the benchmark phase whose records are measured (warm-up records are not)
STAT_PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)  # the percentiles AIPerf's aggregate gives per metric
FAILED = {"type": "RequestError", "message": "the request failed (recommender keeps no error text)"}
_FIX_RECORDS = f"write the folder with aiperf=={AIPERF_VERSION} (`aiperf profile ... --artifact-dir DIR`)"


@dataclass(frozen=True)
class AiperfRun:
    """One AIPerf profiling run: its per-request records on a clock from the first send, and what it ran against."""

    records: RequestLog
    started_at: float  # epoch seconds of t_s = 0 (the first request's send)
    duration_s: float  # from the first send to the last answer
    concurrency: int
    model: str
    url: str
    endpoint_path: str
    endpoint_type: str
    aiperf_version: str
    aggregate: dict[str, Any]  # the aggregate JSON as AIPerf wrote it ({} for a run recommender writes)


def read_aiperf(folder: Path) -> AiperfRun:
    """The run in an AIPerf artifact folder; InputError (exit 2) naming the file, the line or field and the fix."""
    aggregate = _aggregate(folder / AGGREGATE_FILE)
    phase = _profiling_phase(aggregate, folder / AGGREGATE_FILE)
    start_ns, latency_ns, ok = _records(folder / RECORDS_FILE)
    order = np.argsort(start_ns, kind="stable")
    start_ns, latency_ns, ok = start_ns[order], latency_ns[order], ok[order]
    first = int(start_ns[0])
    concurrency = int(phase["concurrency"])
    records = RequestLog(
        t_s=(start_ns - first) / 1e9,
        latency_us=np.rint(latency_ns / 1e3),
        ok=ok,
        users=np.full(len(start_ns), concurrency),
    )
    endpoint = aggregate["input_config"].get("endpoint", {})
    return AiperfRun(
        records=records,
        started_at=first / 1e9,
        duration_s=float(np.max(start_ns + latency_ns) - first) / 1e9,
        concurrency=concurrency,
        model=", ".join(m.get("name", "?") for m in aggregate["input_config"].get("models", {}).get("items", [])),
        url=(endpoint.get("urls") or [""])[0],
        endpoint_path=endpoint.get("path") or "",
        endpoint_type=endpoint.get("type") or "",
        aiperf_version=str(aggregate.get("aiperf_version")),
        aggregate=aggregate,
    )


def _aggregate(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise InputError(f"{path}: no such file: not an AIPerf artifact folder", hint=_FIX_RECORDS)
    try:
        aggregate = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not readable JSON ({exc})", hint=_FIX_RECORDS) from exc
    version = aggregate.get("schema_version") if isinstance(aggregate, dict) else None
    if version != SCHEMA_VERSION:
        raise InputError(
            f"{path}: schema_version {version!r} (AIPerf {aggregate.get('aiperf_version') if version else '?'}); "
            f"this reads schema {SCHEMA_VERSION} (AIPerf {AIPERF_VERSION})",
            hint=f"profile again with aiperf=={AIPERF_VERSION} (`bash scripts/tool_venvs.sh aiperf`)",
        )
    if not isinstance(aggregate.get("input_config"), dict):
        raise InputError(f"{path}: field input_config missing", hint=_FIX_RECORDS)
    return aggregate


def _profiling_phase(aggregate: dict[str, Any], path: Path) -> dict[str, Any]:
    phases = [p for p in aggregate["input_config"].get("phases", []) if p.get("kind") == PROFILING]
    if len(phases) != 1 or phases[0].get("type") != "concurrency" or not phases[0].get("concurrency"):
        kinds = ", ".join(f"{p.get('type')}" for p in phases) or "none"
        raise InputError(
            f"{path}: input_config.phases: one profiling phase of type concurrency is needed (found {kinds})",
            hint="profile with `aiperf profile --concurrency N --request-count M` (a closed-loop run)",
        )
    return phases[0]


def _records(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """request_start_ns, latency (ns) and success of every profiling record."""
    if not path.is_file():
        raise InputError(f"{path}: no such file: AIPerf writes one record per request there", hint=_FIX_RECORDS)
    rows: list[tuple[int, int, bool]] = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                row = _record(line, path, number)
                if row is not None:
                    rows.append(row)
    if not rows:
        raise InputError(f"{path}: no profiling records", hint=_FIX_RECORDS)
    start, latency, ok = zip(*rows, strict=True)
    return np.array(start, dtype=np.int64), np.array(latency, dtype=np.int64), np.array(ok, dtype=bool)


def _record(line: str, path: Path, number: int) -> tuple[int, int, bool] | None:
    """(request_start_ns, latency ns, ok) of one line; None for a record of another phase (warm-up)."""
    try:
        record = json.loads(line)
        metadata = record["metadata"]
        if metadata.get("benchmark_phase", PROFILING) != PROFILING:
            return None
        start, end = int(metadata["request_start_ns"]), int(metadata["request_end_ns"])
        latency = record.get("metrics", {}).get("request_latency")
        latency_ns = end - start if latency is None else _ns(latency)
        failed = record.get("error") is not None or bool(metadata.get("was_cancelled"))
    except ValueError as exc:
        raise InputError(f"{path} line {number}: not a JSON record ({exc})", hint=_FIX_RECORDS) from exc
    except (KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path} line {number}: field {_field(exc)} missing or malformed", hint=_FIX_RECORDS) from exc
    if latency_ns < 0:
        raise InputError(f"{path} line {number}: field metrics.request_latency is negative", hint=_FIX_RECORDS)
    return start, latency_ns, not failed


def _ns(metric: dict[str, Any]) -> int:
    scale = {"ns": 1, "us": 1_000, "ms": 1_000_000, "sec": 1_000_000_000, "s": 1_000_000_000}[metric["unit"]]
    return round(float(metric["value"]) * scale)


def _field(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        name = str(exc.args[0])
        return name if name == "metadata" else f"metadata.{name}" if name.endswith("_ns") else name
    return "metadata / metrics.request_latency"


def write_aiperf(
    folder: Path, records: RequestLog, started_at: float, model: str, url: str, concurrency: int
) -> list[Path]:
    """profile_export.jsonl and profile_export_aiperf.json for `records` (t_s from `started_at`, epoch s); the send
    time and the latency are exact to the microsecond, the latency kept as measured (from the scheduled send for an
    open-loop run)."""
    folder.mkdir(parents=True, exist_ok=True)
    first_ns = round(started_at * 1e9)
    start_ns = first_ns + np.rint(records.t_s * 1e9).astype(np.int64)
    latency_ns = records.latency_us.astype(np.int64) * 1000
    with (folder / RECORDS_FILE).open("w", encoding="utf-8") as out:
        for index in range(len(records)):
            record = _export_record(index, int(start_ns[index]), int(latency_ns[index]), bool(records.ok[index]))
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    end_ns = int(np.max(start_ns + latency_ns)) if len(records) else first_ns
    aggregate = _export_aggregate(records, first_ns, end_ns, model, url, concurrency)
    (folder / AGGREGATE_FILE).write_text(json.dumps(aggregate, indent=2), encoding="utf-8")
    return [folder / RECORDS_FILE, folder / AGGREGATE_FILE]


def _export_record(index: int, start_ns: int, latency_ns: int, ok: bool) -> dict[str, Any]:
    metadata = {
        "session_num": index,
        "conversation_id": f"session_{index:06d}",
        "turn_index": 0,
        "request_start_ns": start_ns,
        "request_end_ns": start_ns + latency_ns,
        "worker_id": "recommender",
        "record_processor_id": "recommender",
        "benchmark_phase": PROFILING,
        "phase_index": 0,
        "profiling_index": 0,
        "phase_name": PROFILING,
        "phase_kind": PROFILING,
        "was_cancelled": False,
        "context_overflow_skip": False,
        "agent_depth": 0,
    }
    if not ok:  # as AIPerf writes a failed request: no latency metric, the time from send to failure in the metadata
        return {"metadata": metadata, "metrics": {}, "error": FAILED}
    metrics = {
        "request_latency": {"value": latency_ns / 1e6, "unit": "ms"},
        "output_sequence_length": {"value": 0, "unit": "tokens"},
    }
    return {"metadata": metadata, "metrics": metrics}


def _export_aggregate(
    records: RequestLog, first_ns: int, end_ns: int, model: str, url: str, concurrency: int
) -> dict[str, Any]:
    """The aggregate JSON's request figures, computed as AIPerf does (numpy linear percentiles, population std)."""
    latency_ms = records.latency_us[records.ok] / 1e3
    seconds = (end_ns - first_ns) / 1e9
    ok = int(np.count_nonzero(records.ok))
    return {
        "schema_version": SCHEMA_VERSION,
        "aiperf_version": AIPERF_VERSION,
        "exported_by": "recommender",
        "request_throughput": {"unit": "requests/sec", "avg": ok / seconds if seconds > 0 else 0.0},
        "request_latency": _stats(latency_ms, "ms"),
        "request_count": {"unit": "requests", "avg": float(ok)},
        "error_request_count": {"unit": "requests", "avg": float(records.failures)},
        "completed_request_count": {"unit": "requests", "avg": float(len(records))},
        "request_error_rate": {"unit": "%", "avg": 100.0 * records.failures / len(records) if len(records) else 0.0},
        "benchmark_duration": {"unit": "sec", "avg": seconds},
        "input_config": {
            "models": {"items": [{"name": model}]},
            "endpoint": {"urls": [url], "type": "embeddings"},
            "phases": [{"name": PROFILING, "kind": PROFILING, "type": "concurrency", "concurrency": concurrency}],
        },
        "error_summary": [{"error_details": FAILED, "count": records.failures}] if records.failures else [],
        "was_cancelled": False,
        "is_complete": True,
        "start_time": _iso(first_ns),
        "end_time": _iso(end_ns),
    }


def _stats(values: np.ndarray, unit: str) -> dict[str, Any]:
    if not len(values):
        return {"unit": unit, "count": 0}
    percentiles = np.percentile(values, STAT_PERCENTILES)
    return {
        "unit": unit,
        "avg": float(np.mean(values)),
        **{f"p{p}": float(v) for p, v in zip(STAT_PERCENTILES, percentiles, strict=True)},
        "min": float(np.min(values)),
        "max": float(np.max(values)),
        "std": float(np.std(values)),
        "count": len(values),
        "sum": float(np.sum(values)),
    }


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).replace(tzinfo=None).isoformat()
