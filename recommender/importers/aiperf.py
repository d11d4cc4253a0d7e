"""AIPerf's record format, both ways: an AIPerf artifact folder read into a request log, a request log written as one.

    read_aiperf(folder) -> AiperfRun        profile_export.jsonl (one record per request) + profile_export_aiperf.json
    write_aiperf(folder, records, ..., load) -> [paths]    the same two files for one load run at one Load, as
                                                         AIPerf 0.13.0 writes them for an embeddings run

Read: each profiling record's request_start_ns (send time) and request_latency (ms, as AIPerf times it: from the send
to the last byte; request_end_ns - request_start_ns for a failed request, which has none), a record with an `error`
or cancelled is a failure; the aggregate JSON gives the version, the model, the URL, the concurrency and the
duration. Only closed-loop (concurrency) runs of an embeddings endpoint map onto a stored run here; anything else (a
rate run, a chat endpoint) is refused by name. Both files are read through the hardened reader (files/document.py)
and every field is checked for its type and range: a hostile file is one line naming the field, exit 2.
Written: what recommender knows per request (send time, latency, success) in AIPerf's fields, and the load the run
offered (a concurrency, or a rate on a constant or Poisson schedule) as its profiling phase; token counts are not
known per request and are left out, output_sequence_length is 0 (an embeddings run has no output tokens).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from recommender.errors import InputError
from recommender.files.document import load_json, load_json_lines
from recommender.metrics.records import RequestLog

RECORDS_FILE = "profile_export.jsonl"
AGGREGATE_FILE = "profile_export_aiperf.json"
SCHEMA_VERSION = "1.4"  # profile_export_aiperf.json's schema_version as AIPerf 0.13.0 writes it
AIPERF_VERSION = "0.13.0"
PROFILING = "profiling"  # the benchmark phase whose records are measured (warm-up records are not)
STAT_PERCENTILES = (1, 5, 10, 25, 50, 75, 90, 95, 99)  # the percentiles AIPerf's aggregate gives per metric
FAILED = {"type": "RequestError", "message": "the request failed (recommender keeps no error text)"}
CONCURRENCY, RATE = "concurrency", "rate"
ENDPOINT_TYPES = ("embeddings",)  # AIPerf endpoint types a stored run can be (a later issue adds generative ones)
MAX_CONCURRENCY = 10_000  # the most users recommender's traffic takes (spec/traffic.py)
MAX_NS = 2**62  # a clock reading past this (the year 2116) is not one: the int64 arrays hold any two summed
MAX_LATENCY_NS = 86_400 * 10**9  # a latency of more than a day is not one
_SCALE = {"ns": 1, "us": 1_000, "ms": 1_000_000, "sec": 1_000_000_000, "s": 1_000_000_000}
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


@dataclass(frozen=True)
class Load:
    """What one exported load run offered: `concurrency` users (closed loop), or `rate` requests per second sent on
    a `constant` or `poisson` schedule (open loop); AIPerf's profiling phase says the same."""

    kind: str  # CONCURRENCY or RATE
    value: float
    arrival: str = "constant"  # open loop: AIPerf's phase type (constant | poisson)

    def phase(self) -> dict[str, Any]:
        if self.kind == CONCURRENCY:
            return {"name": PROFILING, "kind": PROFILING, "type": CONCURRENCY, "concurrency": int(self.value)}
        return {"name": PROFILING, "kind": PROFILING, "type": self.arrival, "rate": self.value}

    @property
    def label(self) -> str:
        """`concurrency 4`, `rate 12.5/s`."""
        return f"concurrency {int(self.value)}" if self.kind == CONCURRENCY else f"rate {self.value:g}/s"


def read_aiperf(folder: Path) -> AiperfRun:
    """The run in an AIPerf artifact folder; InputError (exit 2) naming the file, the line or field and the fix."""
    path = folder / AGGREGATE_FILE
    aggregate = _aggregate(path)
    config = _object(aggregate["input_config"], "input_config", path)
    concurrency = _profiling_concurrency(config, path)
    endpoint = _object(config.get("endpoint", {}), "input_config.endpoint", path)
    endpoint_type = _endpoint_type(endpoint, path)
    start_ns, latency_ns, ok = _records(folder / RECORDS_FILE)
    order = np.argsort(start_ns, kind="stable")
    start_ns, latency_ns, ok = start_ns[order], latency_ns[order], ok[order]
    first = int(start_ns[0])
    records = RequestLog(
        t_s=(start_ns - first) / 1e9,
        latency_us=np.rint(latency_ns / 1e3),
        ok=ok,
        users=np.full(len(start_ns), concurrency),
    )
    return AiperfRun(
        records=records,
        started_at=first / 1e9,
        duration_s=float(np.max(start_ns + latency_ns) - first) / 1e9,
        concurrency=concurrency,
        model=_models(config, path),
        url=_url(endpoint, path),
        endpoint_path=_text(endpoint.get("path") or "", "input_config.endpoint.path", path),
        endpoint_type=endpoint_type,
        aiperf_version=str(aggregate.get("aiperf_version")),
        aggregate=aggregate,
    )


def _aggregate(path: Path) -> dict[str, Any]:
    if not path.exists():
        raise InputError(f"{path}: no such file: not an AIPerf artifact folder", hint=_FIX_RECORDS)
    aggregate = load_json(path, "AIPerf aggregate file")
    version = aggregate.get("schema_version") if isinstance(aggregate, dict) else None
    if version != SCHEMA_VERSION:
        written_by = str(aggregate.get("aiperf_version"))[:40] if version else "?"
        raise InputError(
            f"{path}: schema_version {_shown(version)} (AIPerf {written_by}); "
            f"this reads schema {SCHEMA_VERSION} (AIPerf {AIPERF_VERSION})",
            hint=f"profile again with aiperf=={AIPERF_VERSION} (`bash scripts/tool_venvs.sh aiperf`)",
        )
    if "input_config" not in aggregate:
        raise InputError(f"{path}: field input_config missing", hint=_FIX_RECORDS)
    return aggregate


def _profiling_concurrency(config: dict[str, Any], path: Path) -> int:
    """The concurrency of the one profiling phase; a rate phase (open loop) or anything else refused by name."""
    phases = config.get("phases", [])
    if not isinstance(phases, list) or not all(isinstance(p, dict) for p in phases):
        raise InputError(
            f"{path}: field input_config.phases is {_shown(phases)}, not a list of phase objects", hint=_FIX_RECORDS
        )
    profiling = [p for p in phases if p.get("kind") == PROFILING]
    if len(profiling) != 1 or profiling[0].get("type") != CONCURRENCY:
        kinds = ", ".join(_shown(p.get("type")) for p in profiling) or "none"
        raise InputError(
            f"{path}: input_config.phases: one profiling phase of type concurrency is needed (found {kinds}); "
            "an open-loop (rate) run is not imported",
            hint="profile with `aiperf profile --concurrency N --request-count M` (a closed-loop run)",
        )
    concurrency = profiling[0].get("concurrency")
    if not _is_int(concurrency) or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise InputError(
            f"{path}: field input_config.phases[profiling].concurrency is {_shown(concurrency)}, not a whole number "
            f"of users from 1 to {MAX_CONCURRENCY}",
            hint=_FIX_RECORDS,
        )
    return int(concurrency)


def _endpoint_type(endpoint: dict[str, Any], path: Path) -> str:
    """The endpoint type, refused by name unless it is one recommender stores (embeddings)."""
    kind = endpoint.get("type")
    if kind not in ENDPOINT_TYPES:
        raise InputError(
            f"{path}: field input_config.endpoint.type is {_shown(kind)}: recommender stores embeddings runs only "
            f"({', '.join(ENDPOINT_TYPES)}); a generative endpoint (chat, completions) is not imported",
            hint="import an `aiperf profile --endpoint-type embeddings` run",
        )
    return str(kind)


def _models(config: dict[str, Any], path: Path) -> str:
    items = _object(config.get("models"), "input_config.models", path).get("items")
    if not isinstance(items, list) or not items or not all(_named(item) for item in items):
        raise InputError(
            f"{path}: field input_config.models.items is {_shown(items)}, not a list of {{name: MODEL}} objects",
            hint=_FIX_RECORDS,
        )
    return ", ".join(item["name"] for item in items)


def _named(item: Any) -> bool:
    return isinstance(item, dict) and isinstance(item.get("name"), str) and bool(item["name"])


def _url(endpoint: dict[str, Any], path: Path) -> str:
    """The first of AIPerf's --url values (one URL as a string is that URL, as AIPerf itself reads it)."""
    urls = endpoint.get("urls")
    urls = [urls] if isinstance(urls, str) else urls
    if not isinstance(urls, list) or not urls or not isinstance(urls[0], str) or not urls[0].strip():
        raise InputError(
            f"{path}: field input_config.endpoint.urls is {_shown(endpoint.get('urls'))}, not a list of URLs",
            hint=_FIX_RECORDS,
        )
    return urls[0].strip()


def _records(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """request_start_ns, latency (ns) and success of every profiling record."""
    if not path.exists():
        raise InputError(f"{path}: no such file: AIPerf writes one record per request there", hint=_FIX_RECORDS)
    lines = load_json_lines(path, "AIPerf record file")
    rows = [row for number, record in lines if (row := _record(record, path, number)) is not None]
    if not rows:
        raise InputError(f"{path}: no profiling records", hint=_FIX_RECORDS)
    start, latency, ok = zip(*rows, strict=True)
    return np.array(start, dtype=np.int64), np.array(latency, dtype=np.int64), np.array(ok, dtype=bool)


def _record(record: Any, path: Path, number: int) -> tuple[int, int, bool] | None:
    """(request_start_ns, latency ns, ok) of one line; None for a record of another phase (warm-up)."""
    where = f"{path}: line {number}"
    record = _object(record, "(the record)", where)
    metadata = _object(record.get("metadata"), "metadata", where)
    if metadata.get("benchmark_phase", PROFILING) != PROFILING:
        return None
    start = _time_ns(metadata.get("request_start_ns"), "metadata.request_start_ns", where)
    end = _time_ns(metadata.get("request_end_ns"), "metadata.request_end_ns", where)
    if end < start:
        raise InputError(f"{where}: field metadata.request_end_ns is before request_start_ns", hint=_FIX_RECORDS)
    latency = _object(record.get("metrics", {}), "metrics", where).get("request_latency")
    latency_ns = end - start if latency is None else _latency_ns(latency, where)
    failed = record.get("error") is not None or metadata.get("was_cancelled") is True
    return start, latency_ns, not failed


def _time_ns(value: Any, field: str, where: str | Path) -> int:
    """A clock reading in ns since the epoch: a whole number from 0 to MAX_NS."""
    if not _is_int(value) or not 0 <= value <= MAX_NS:
        found = "missing" if value is None else f"is {_shown(value)}, not a time in ns (a whole number from 0 to 2**62)"
        raise InputError(f"{where}: field {field} {found}", hint=_FIX_RECORDS)
    return int(value)


def _latency_ns(metric: Any, where: str) -> int:
    metric = _object(metric, "metrics.request_latency", where)
    scale, value = _SCALE.get(str(metric.get("unit"))), metric.get("value")
    number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    if scale is None or not number or not 0 <= value * scale <= MAX_LATENCY_NS:
        raise InputError(
            f"{where}: field metrics.request_latency is {_shown(metric)}: a value from 0 to a day "
            f"in {', '.join(_SCALE)} is needed",
            hint=_FIX_RECORDS,
        )
    return round(value * scale)


def _object(value: Any, field: str, where: str | Path) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InputError(f"{where}: field {field} is {_shown(value)}, not an object", hint=_FIX_RECORDS)
    return value


def _text(value: Any, field: str, where: str | Path) -> str:
    if not isinstance(value, str):
        raise InputError(f"{where}: field {field} is {_shown(value)}, not a string", hint=_FIX_RECORDS)
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    """A value as a message quotes it: its type and a short repr on one line."""
    text = " ".join(repr(value).split())
    return f"{text[:60]}..." if len(text) > 60 else text


def write_aiperf(folder: Path, records: RequestLog, started_at: float, model: str, url: str, load: Load) -> list[Path]:
    """profile_export.jsonl and profile_export_aiperf.json for `records` of one load run at `load` (t_s from
    `started_at`, epoch s); the send time and the latency are exact to the microsecond, the latency kept as measured
    (from the scheduled send for an open-loop run)."""
    folder.mkdir(parents=True, exist_ok=True)
    first_ns = round(started_at * 1e9)
    start_ns = first_ns + np.rint(records.t_s * 1e9).astype(np.int64)
    latency_ns = records.latency_us.astype(np.int64) * 1000
    with (folder / RECORDS_FILE).open("w", encoding="utf-8") as out:
        for index in range(len(records)):
            record = _export_record(index, int(start_ns[index]), int(latency_ns[index]), bool(records.ok[index]))
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    end_ns = int(np.max(start_ns + latency_ns)) if len(records) else first_ns
    aggregate = _export_aggregate(records, first_ns, end_ns, model, url, load)
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
    records: RequestLog, first_ns: int, end_ns: int, model: str, url: str, load: Load
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
            "phases": [load.phase()],
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
