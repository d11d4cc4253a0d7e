"""AIPerf's record format, both ways: an AIPerf artifact folder read into a request log, a request log written as one.

    read_aiperf(folder) -> AiperfRun        profile_export.jsonl (one record per request) + profile_export_aiperf.json
    read_records(folder) -> RequestLog      the records alone, of a run at any load (benchmarks/llm_fidelity.py)
    write_aiperf(folder, records, ..., load, endpoint_type) -> [paths]    the same two files for one load run at one
                                          Load, as AIPerf 0.13.0 writes them (embeddings, chat, completions)

Read: each profiling record's request_start_ns (send time) and request_latency (ms, as AIPerf times it: from the send
to the last byte; request_end_ns - request_start_ns for a failed request, which has none), a record with an `error`
or cancelled is a failure; the aggregate JSON gives the version, the model, the URL, the concurrency, the endpoint type
and the duration. A streamed chat or completions run (a generative run) also gives each request's token-level record,
read into the request log's generation columns (metrics/records.py): time_to_first_token (ttft_us), the content
chunks' arrivals (time_to_first_token, then each inter_chunk_latency after it: chunk_us), input_sequence_length and
output_sequence_length (input_tokens, output_tokens; the server's `usage` when the run had use_server_token_count,
else AIPerf's tokenizer: tokens_counted), and a clean finish (no error, not cancelled). A record that finished without
one content chunk is a failure here (recommender's rule: an answer has at least one output token; AIPerf counts it).
Only closed-loop (concurrency) runs map onto a stored run here; anything else (a rate run, an endpoint type other than
embeddings, chat and completions, a chat run that was not streamed) is refused by name. Both files are read through
the hardened reader (files/document.py) and every field is checked for its type and range: a hostile file is one line
naming the field, exit 2.
Written: what recommender knows per request (send time, latency, success; for a generative run its TTFT, chunk times,
token counts and AIPerf's per-request ITL and tokens/s per user computed from them as AIPerf does) in AIPerf's fields,
and the load the run offered (a concurrency, or a rate on a constant or Poisson schedule) as its profiling phase. An
embeddings run's token counts are not known per request and are left out, output_sequence_length is 0 (no output
tokens).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

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
EMBEDDINGS, CHAT, COMPLETIONS = "embeddings", "chat", "completions"
# AIPerf endpoint types a stored run can be, and the target protocol (spec/target.py) it is stored with
PROTOCOLS = {EMBEDDINGS: "openai", CHAT: "openai-chat", COMPLETIONS: "openai-completions"}
GENERATIVE = (CHAT, COMPLETIONS)
# AIPerf's path for a generative type when the run gave none (--custom-endpoint): the base URL is what precedes it
DEFAULT_PATHS = {CHAT: "/v1/chat/completions", COMPLETIONS: "/v1/completions"}
SUFFIXES = {EMBEDDINGS: "/embeddings", CHAT: "/chat/completions", COMPLETIONS: "/completions"}
MAX_TOKENS = 2**31 - 1  # a token count the int32 columns hold
MAX_CHUNKS = 1_000_000  # more content chunks than this in one answer is not a record
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
    endpoint_type: str  # embeddings, chat or completions
    aiperf_version: str
    aggregate: dict[str, Any]  # the aggregate JSON as AIPerf wrote it ({} for a run recommender writes)

    @property
    def protocol(self) -> str:
        """The target protocol the endpoint speaks (openai, openai-chat, openai-completions)."""
        return PROTOCOLS[self.endpoint_type]

    @property
    def base_url(self) -> str:
        """The OpenAI base URL (what `/embeddings`, `/chat/completions` or `/completions` is appended to)."""
        path = self.endpoint_path or DEFAULT_PATHS.get(self.endpoint_type, "")
        suffix = SUFFIXES[self.endpoint_type]
        return self.url.rstrip("/") + (path.removesuffix(suffix) if path.endswith(suffix) else "")


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
    records, first_ns, end_ns = _request_log(folder, endpoint, endpoint_type, concurrency)
    return AiperfRun(
        records=records,
        started_at=first_ns / 1e9,
        duration_s=(end_ns - first_ns) / 1e9,
        concurrency=concurrency,
        model=_models(config, path),
        url=_url(endpoint, path),
        endpoint_path=_text(endpoint.get("path") or "", "input_config.endpoint.path", path),
        endpoint_type=endpoint_type,
        aiperf_version=str(aggregate.get("aiperf_version")),
        aggregate=aggregate,
    )


def read_records(folder: Path) -> RequestLog:
    """The profiling records of an AIPerf folder of any load (a rate run too) as a request log, t_s from its first
    send, `users` 0: what a benchmark scores AIPerf's run by (read_aiperf is what a stored run needs)."""
    path = folder / AGGREGATE_FILE
    config = _object(_aggregate(path)["input_config"], "input_config", path)
    endpoint = _object(config.get("endpoint", {}), "input_config.endpoint", path)
    return _request_log(folder, endpoint, _endpoint_type(endpoint, path), 0)[0]


def _request_log(folder: Path, endpoint: dict[str, Any], endpoint_type: str, users: int) -> tuple[RequestLog, int, int]:
    """The records as a request log on a clock from the first send, that send's and the last answer's time (ns)."""
    counted = endpoint.get("use_server_token_count", False) is not True
    rows = _records(folder / RECORDS_FILE, endpoint_type in GENERATIVE)
    rows.sort(key=lambda row: row.start_ns)  # stable: records sent at the same ns keep their order
    start_ns = np.array([row.start_ns for row in rows], dtype=np.int64)
    latency_ns = np.array([row.latency_ns for row in rows], dtype=np.int64)
    first = int(start_ns[0])
    records = RequestLog(
        t_s=(start_ns - first) / 1e9,
        latency_us=np.rint(latency_ns / 1e3),
        ok=np.array([row.ok for row in rows], dtype=bool),
        users=np.full(len(rows), users),
        **(_generation_columns(rows, counted) if endpoint_type in GENERATIVE else {}),
    )
    return records, first, int(np.max(start_ns + latency_ns))


@dataclass(frozen=True)
class _Row:
    """One profiling record: send time and latency (ns), success; for a generative run its token-level record."""

    start_ns: int
    latency_ns: int
    ok: bool
    finished: bool = True  # no error, not cancelled (ok also needs a content chunk in a generative run)
    ttft_ns: int = -1  # -1: no content chunk
    chunks_ns: tuple[int, ...] = ()  # each content chunk's arrival, ns from the send
    input_tokens: int = -1  # -1: unknown
    output_tokens: int = 0


def _generation_columns(rows: list[_Row], counted: bool) -> dict[str, Any]:
    """The request log's generation columns of `rows` (chunk times in us, one flat array with each row's slice)."""
    counts = np.array([len(row.chunks_ns) for row in rows], dtype=np.int64)
    flat = [ns for row in rows for ns in row.chunks_ns]
    return {
        "ttft_us": [-1 if row.ttft_ns < 0 else round(row.ttft_ns / 1e3) for row in rows],
        "input_tokens": [row.input_tokens for row in rows],
        "output_tokens": [row.output_tokens for row in rows],
        "tokens_counted": np.full(len(rows), counted),
        "finished": [row.finished for row in rows],
        "chunk_start": np.concatenate([[0], np.cumsum(counts)[:-1]]),
        "chunk_count": counts,
        "chunk_us": np.rint(np.array(flat, dtype=np.float64) / 1e3),
    }


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
    """The endpoint type, refused by name unless it is one recommender stores (embeddings, or streamed chat and
    completions: a generation's token times come from its stream)."""
    kind = endpoint.get("type")
    if kind not in PROTOCOLS:
        raise InputError(
            f"{path}: field input_config.endpoint.type is {_shown(kind)}: recommender stores "
            f"{', '.join(PROTOCOLS)} runs only",
            hint="import an `aiperf profile --endpoint-type embeddings` run, or a `chat` or `completions` one with "
            "--streaming",
        )
    if kind in GENERATIVE and endpoint.get("streaming") is not True:
        raise InputError(
            f"{path}: field input_config.endpoint.streaming is {_shown(endpoint.get('streaming'))}: a {kind} run "
            "that was not streamed has no token times (time to first token, inter-token latency)",
            hint=f"profile again with `aiperf profile --endpoint-type {kind} --streaming`",
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


def _records(path: Path, generative: bool) -> list[_Row]:
    """Every profiling record (warm-up records left out)."""
    if not path.exists():
        raise InputError(f"{path}: no such file: AIPerf writes one record per request there", hint=_FIX_RECORDS)
    lines = load_json_lines(path, "AIPerf record file")
    rows = [row for number, record in lines if (row := _record(record, path, number, generative)) is not None]
    if not rows:
        raise InputError(f"{path}: no profiling records", hint=_FIX_RECORDS)
    return rows


def _record(record: Any, path: Path, number: int, generative: bool) -> _Row | None:
    """One line's row; None for a record of another phase (warm-up)."""
    where = f"{path}: line {number}"
    record = _object(record, "(the record)", where)
    metadata = _object(record.get("metadata"), "metadata", where)
    if metadata.get("benchmark_phase", PROFILING) != PROFILING:
        return None
    start = _time_ns(metadata.get("request_start_ns"), "metadata.request_start_ns", where)
    end = _time_ns(metadata.get("request_end_ns"), "metadata.request_end_ns", where)
    if end < start:
        raise InputError(f"{where}: field metadata.request_end_ns is before request_start_ns", hint=_FIX_RECORDS)
    metrics = _object(record.get("metrics", {}), "metrics", where)
    latency = metrics.get("request_latency")
    latency_ns = end - start if latency is None else _duration_ns(latency, "metrics.request_latency", where)
    failed = record.get("error") is not None or metadata.get("was_cancelled") is True
    if not generative:
        return _Row(start, latency_ns, not failed)
    ttft = metrics.get("time_to_first_token")
    ttft_ns = -1 if ttft is None else _duration_ns(ttft, "metrics.time_to_first_token", where)
    chunks = (ttft_ns, *(ttft_ns + gap for gap in _gaps_ns(metrics, where))) if ttft_ns >= 0 else ()
    return _Row(
        start,
        latency_ns,
        ok=not failed and ttft_ns >= 0,
        finished=not failed,
        ttft_ns=ttft_ns,
        chunks_ns=tuple(int(ns) for ns in chunks),
        input_tokens=_tokens(metrics, "input_sequence_length", where, missing=-1),
        output_tokens=_tokens(metrics, "output_sequence_length", where, missing=0),
    )


def _gaps_ns(metrics: dict[str, Any], where: str) -> np.ndarray:
    """Each content chunk's arrival after the first, in ns (the running sum of AIPerf's inter_chunk_latency list)."""
    metric = metrics.get("inter_chunk_latency")
    if metric is None:
        return np.zeros(0, dtype=np.int64)  # one content chunk: no gap
    metric = _object(metric, "metrics.inter_chunk_latency", where)
    values, scale = metric.get("value"), _SCALE.get(str(metric.get("unit")))
    numbers = isinstance(values, list) and len(values) <= MAX_CHUNKS and all(_finite(v) and v >= 0 for v in values)
    if scale is None or not numbers or sum(values or []) * scale > MAX_LATENCY_NS:
        raise InputError(
            f"{where}: field metrics.inter_chunk_latency is {_shown(metric)}: a list of gaps from 0 (at most "
            f"{MAX_CHUNKS:,}, a day in all) in {', '.join(_SCALE)} is needed",
            hint=_FIX_RECORDS,
        )
    return np.cumsum(np.rint(np.array(values, dtype=np.float64) * scale).astype(np.int64))


def _tokens(metrics: dict[str, Any], name: str, where: str, missing: int) -> int:
    """A token count metric (a whole number of tokens), `missing` when the record has none."""
    metric = metrics.get(name)
    if metric is None:
        return missing
    metric = _object(metric, f"metrics.{name}", where)
    value, unit = metric.get("value"), metric.get("unit")
    if unit != "tokens" or not (_finite(value) and float(value).is_integer() and 0 <= value <= MAX_TOKENS):
        raise InputError(
            f"{where}: field metrics.{name} is {_shown(metric)}: a whole number of tokens from 0 to {MAX_TOKENS:,} "
            "is needed",
            hint=_FIX_RECORDS,
        )
    return int(value)


def _time_ns(value: Any, field: str, where: str | Path) -> int:
    """A clock reading in ns since the epoch: a whole number from 0 to MAX_NS."""
    if not _is_int(value) or not 0 <= value <= MAX_NS:
        found = "missing" if value is None else f"is {_shown(value)}, not a time in ns (a whole number from 0 to 2**62)"
        raise InputError(f"{where}: field {field} {found}", hint=_FIX_RECORDS)
    return int(value)


def _duration_ns(metric: Any, field: str, where: str) -> int:
    """A time metric ({value, unit}) in ns: from 0 to a day."""
    metric = _object(metric, field, where)
    scale, value = _SCALE.get(str(metric.get("unit"))), metric.get("value")
    if scale is None or not _finite(value) or not 0 <= value * scale <= MAX_LATENCY_NS:
        raise InputError(
            f"{where}: field {field} is {_shown(metric)}: a value from 0 to a day in {', '.join(_SCALE)} is needed",
            hint=_FIX_RECORDS,
        )
    return round(value * scale)


def _finite(value: Any) -> TypeGuard[int | float]:
    """A real number (not a bool, not NaN or infinite)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


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


def write_aiperf(
    folder: Path, records: RequestLog, started_at: float, model: str, url: str | None, load: Load, endpoint_type: str
) -> list[Path]:
    """profile_export.jsonl and profile_export_aiperf.json for `records` of one load run at `load` (t_s from
    `started_at`, epoch s) against an `endpoint_type` endpoint (embeddings; chat or completions for a generative log);
    the send time, the latency and a generation's TTFT and chunk times are exact to the microsecond, the latency kept
    as measured (from the scheduled send for an open-loop run). `url`: the base URL the endpoint's path follows
    (aiperf_url); None where it is not known: `urls` is then left out rather than written empty."""
    if (endpoint_type in GENERATIVE) != records.generative:
        raise ValueError(f"endpoint type {endpoint_type} for a {'generative' if records.generative else 'plain'} log")
    folder.mkdir(parents=True, exist_ok=True)
    first_ns = round(started_at * 1e9)
    start_ns = first_ns + np.rint(records.t_s * 1e9).astype(np.int64)
    latency_ns = records.latency_us.astype(np.int64) * 1000
    per_request = [_generation_metrics(records, index) for index in range(len(records))] if records.generative else []
    with (folder / RECORDS_FILE).open("w", encoding="utf-8") as out:
        for index in range(len(records)):
            metrics = per_request[index] if per_request else {"output_sequence_length": {"value": 0, "unit": "tokens"}}
            record = _export_record(index, int(start_ns[index]), int(latency_ns[index]), bool(records.ok[index]))
            if "error" not in record:
                record["metrics"] |= metrics
            out.write(json.dumps(record, separators=(",", ":")) + "\n")
    end_ns = int(np.max(start_ns + latency_ns)) if len(records) else first_ns
    aggregate = _export_aggregate(records, first_ns, end_ns, model, url, load, endpoint_type)
    if per_request:
        aggregate |= _generation_aggregate(per_request, records, (end_ns - first_ns) / 1e9)
    (folder / AGGREGATE_FILE).write_text(json.dumps(aggregate, indent=2), encoding="utf-8")
    return [folder / RECORDS_FILE, folder / AGGREGATE_FILE]


def aiperf_url(sent_to: str, endpoint_type: str) -> str:
    """The URL AIPerf's `urls` holds for requests sent to `sent_to`: the base its endpoint path is appended to
    (`http://127.0.0.1:8000/v1` for `.../v1/chat/completions`, as a remote target's endpoint is given), or the URL as
    it is where it does not end in the type's path (a Triton infer URL)."""
    suffix = SUFFIXES[endpoint_type]
    return sent_to.removesuffix(suffix) if sent_to.endswith(suffix) else sent_to


def aiperf_endpoint_type(protocol: str, generative: bool) -> str:
    """The AIPerf endpoint type a stored run's records are exported as: chat or completions for a generative log (by
    its target's protocol; chat unless openai-completions), embeddings otherwise (what AIPerf has for one answer per
    request, a Triton run's too)."""
    if not generative:
        return EMBEDDINGS
    return COMPLETIONS if protocol == PROTOCOLS[COMPLETIONS] else CHAT


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
    return {"metadata": metadata, "metrics": {"request_latency": {"value": latency_ns / 1e6, "unit": "ms"}}}


def _generation_metrics(records: RequestLog, row: int) -> dict[str, Any]:
    """One generation's token-level metrics as AIPerf records them (ms, tokens): TTFT, the gaps between content
    chunks, the token counts, and from them AIPerf's inter_token_latency ((latency - TTFT) / (output tokens - 1)) and
    output_token_throughput_per_user (1 / ITL)."""
    assert records.ttft_us is not None and records.input_tokens is not None and records.output_tokens is not None
    ttft_us, output = int(records.ttft_us[row]), int(records.output_tokens[row])
    metrics: dict[str, Any] = {"output_sequence_length": {"value": output, "unit": "tokens"}}
    if records.input_tokens[row] >= 0:
        metrics["input_sequence_length"] = {"value": int(records.input_tokens[row]), "unit": "tokens"}
    if ttft_us < 0:
        return metrics
    metrics["time_to_first_token"] = {"value": ttft_us / 1e3, "unit": "ms"}
    chunks = records.chunk_times_us(row)
    if len(chunks) > 1:
        metrics["inter_chunk_latency"] = {"value": (np.diff(chunks) / 1e3).tolist(), "unit": "ms"}
    decode_ms = (int(records.latency_us[row]) - ttft_us) / 1e3
    if output > 1 and decode_ms > 0:
        itl_ms = decode_ms / (output - 1)
        metrics["inter_token_latency"] = {"value": itl_ms, "unit": "ms"}
        metrics["output_token_throughput_per_user"] = {"value": 1e3 / itl_ms, "unit": "tokens/sec/user"}
    return metrics


def _generation_aggregate(per_request: list[dict[str, Any]], records: RequestLog, seconds: float) -> dict[str, Any]:
    """The aggregate JSON's generation figures over the answered requests, as AIPerf computes them."""
    answered = [metrics for metrics, ok in zip(per_request, records.ok, strict=True) if ok]

    def values(name: str) -> np.ndarray:
        found = [m[name]["value"] for m in answered if name in m]
        flat = [v for value in found for v in (value if isinstance(value, list) else [value])]
        return np.array(flat, dtype=np.float64)

    units = {
        "time_to_first_token": "ms",
        "inter_token_latency": "ms",
        "inter_chunk_latency": "ms",
        "output_token_throughput_per_user": "tokens/sec/user",
        "output_sequence_length": "tokens",
        "input_sequence_length": "tokens",
    }
    total_osl, total_isl = float(values("output_sequence_length").sum()), float(values("input_sequence_length").sum())
    return {name: _stats(values(name), unit) for name, unit in units.items()} | {
        "output_token_throughput": {"unit": "tokens/sec", "avg": total_osl / seconds if seconds > 0 else 0.0},
        "total_osl": {"unit": "tokens", "avg": total_osl},
        "total_isl": {"unit": "tokens", "avg": total_isl},
    }


def _export_aggregate(
    records: RequestLog, first_ns: int, end_ns: int, model: str, url: str | None, load: Load, endpoint_type: str
) -> dict[str, Any]:
    """The aggregate JSON's request figures, computed as AIPerf does (numpy linear percentiles, population std)."""
    latency_ms = records.latency_us[records.ok] / 1e3
    seconds = (end_ns - first_ns) / 1e9
    ok = int(np.count_nonzero(records.ok))
    endpoint: dict[str, Any] = ({"urls": [url]} if url else {}) | {"type": endpoint_type}
    if records.generative:
        assert records.tokens_counted is not None
        counted = bool(np.any(records.tokens_counted))
        endpoint |= {"path": SUFFIXES[endpoint_type], "streaming": True, "use_server_token_count": not counted}
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
            "endpoint": endpoint,
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
