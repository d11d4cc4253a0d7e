"""Trace replay: a file of request timestamps (and optionally a payload index per request) as an open-loop schedule.

A trace file is UTF-8 text, one request a line: a timestamp in seconds, optionally followed by a comma (or spaces)
and the request's payload index, an index into `load/payload.py::request_token_ids(payload)` (the payload's requests
in order; the load child's request bodies are in the same order). Blank lines and lines starting with `#` are
skipped. Timestamps are in any origin (epoch seconds or seconds from the start) and must not decrease; the replay
starts at the first one and sends request k at `(t_k - t_0) / speedup`. Lines without an index take the payload's
requests in turn; an index is on every line or on none.

A mooncake trace (`format: mooncake`, the shape of Mooncake's published traces) is JSON Lines, one request a line:
`{"timestamp": MS, "input_length": N, "output_length": M}`, the timestamp in milliseconds. Other keys (Mooncake's
`hash_ids`, the blocks a prompt shares with earlier ones) are ignored: the prompts sent are synthesised at each row's
lengths (load/prompts.py), so request k is sent prompt k (its payload index is k).

`read_trace` parses through the project's hardened loader (files/document.py: size cap, binary, encoding);
`check_replayable` refuses a trace the generator cannot replay. Both raise an `InputError` naming the file and the
line. No Locust and no pydantic here: the load child reads the trace itself (`load/shapes.py` `TrafficPlan.sends`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recommender.errors import InputError
from recommender.files.document import parse_json_line, read_lines, read_text
from recommender.files.payload_file import MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_PROMPTS_TOKENS

KIND = "trace file"
MAX_RATE = 100_000.0  # requests/s: the generator's ceiling, the most any open-loop shape may schedule (rate's bound)
MAX_DURATION_S = 7200.0  # the longest replay, the longest level of any other shape
_HINT = "A trace line is `SECONDS` or `SECONDS,PAYLOAD_INDEX`, e.g. `12.034,3`; timestamps in file order."


@dataclass(frozen=True)
class Trace:
    """A parsed trace: request times in seconds from the first one (ascending), their payload indices (None: in turn)
    and the file line of each request (for messages)."""

    times: np.ndarray
    indices: np.ndarray | None
    lines: np.ndarray
    input_lengths: np.ndarray | None = None  # mooncake: each request's prompt and output tokens
    output_lengths: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.times)

    def replay_times(self, speedup: float) -> np.ndarray:
        """Send times of the replay, seconds from its start."""
        return self.times / speedup

    def duration(self, speedup: float) -> float:
        """The replay's length: the span of its sends plus one mean gap, so that its n sends fill [0, duration) as a
        constant rate of n / duration would (its level's rate)."""
        span = float(self.times[-1]) / speedup
        return span + span / (len(self) - 1)


def read_trace(path: str | Path, error: type[InputError] = InputError, format: str = "seconds") -> Trace:
    """Parse a trace file (`format`: seconds or mooncake); unsorted timestamps, a bad number, a negative index or a
    mixed index column are an `error` naming the line."""
    path = Path(path)
    if format == "mooncake":
        return _mooncake(path, error)
    times: list[float] = []
    indices: list[int] = []
    lines: list[int] = []
    first_without: int | None = None
    for number, raw in enumerate(read_text(path, KIND, error).splitlines(), start=1):
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        fields = text.replace(",", " ").split()
        if len(fields) > 2:
            raise error(f"{path}: line {number}: {len(fields)} fields, at most 2 (timestamp, payload index)", _HINT)
        t = _timestamp(fields[0], path, number, error)
        if times and t < times[-1]:
            raise error(
                f"{path}: line {number}: timestamp {fields[0]} is before the previous request's ({times[-1]:g}); "
                "a trace is replayed in file order",
                hint="Sort the file by its first column (e.g. `sort -g -k1,1 -t, trace.csv`).",
            )
        if len(fields) == 2:
            indices.append(_index(fields[1], path, number, error))
        elif first_without is None:
            first_without = number
        if indices and first_without is not None:
            raise error(
                f"{path}: line {max(first_without, number)}: a payload index on some lines and not on others",
                hint="Give a payload index on every line or on none (none: the payload's requests in turn).",
            )
        times.append(t)
        lines.append(number)
    stamps = _spread(times, lines, path, error, _HINT)
    return Trace(stamps, np.asarray(indices, dtype=np.int64) if indices else None, np.asarray(lines))


def _spread(times: list[float], lines: list[int], path: Path, error: type[InputError], hint: str) -> np.ndarray:
    """The times from the first one; refused unless there are 2 or more, with time between the first and the last."""
    if len(times) < 2:
        raise error(f"{path}: holds {len(times)} request timestamp(s); a trace needs at least 2", hint=hint)
    if times[-1] == times[0]:
        raise error(
            f"{path}: line {lines[-1]}: every timestamp is {times[0]:g}; a trace needs time between its first and "
            "last request",
            hint=hint,
        )
    stamps = np.asarray(times, dtype=float)
    return stamps - stamps[0]


_MOONCAKE_HINT = 'A mooncake line is {"timestamp": MS, "input_length": N, "output_length": M}, in timestamp order.'


def _mooncake(path: Path, error: type[InputError]) -> Trace:
    """A Mooncake-style JSONL trace: ms timestamps (not decreasing), each row's input and output lengths in tokens."""
    times: list[float] = []
    lengths: list[tuple[int, int]] = []
    numbers: list[int] = []
    total = 0
    for number, text in read_lines(path, KIND, error):
        row = parse_json_line(text, path, number, error)
        if not isinstance(row, dict):
            raise error(f"{path}: line {number}: is a JSON {type(row).__name__}, not an object", hint=_MOONCAKE_HINT)
        stamp = row.get("timestamp")
        if isinstance(stamp, bool) or not isinstance(stamp, int | float) or not np.isfinite(stamp):
            raise error(f"{path}: line {number}: `timestamp` is not a number of milliseconds", hint=_MOONCAKE_HINT)
        t = stamp / 1000.0
        if times and t < times[-1]:
            raise error(
                f"{path}: line {number}: timestamp {row['timestamp']} is before the previous request's "
                f"({times[-1] * 1000:g}); a trace is replayed in file order",
                hint="Sort the rows by timestamp.",
            )
        lengths.append(
            (
                _tokens(row, "input_length", MAX_PROMPT_TOKENS, path, number, error),
                _tokens(row, "output_length", MAX_OUTPUT_TOKENS, path, number, error),
            )
        )
        times.append(t)
        numbers.append(number)
        total += lengths[-1][0]
        if total > MAX_PROMPTS_TOKENS:
            raise error(
                f"{path}: line {number}: the rows so far ask for {total:,} prompt tokens, over the "
                f"{MAX_PROMPTS_TOKENS:,} synthesised before a run",
                hint="Cut the trace to the rows you mean to replay.",
            )
    stamps = _spread(times, numbers, path, error, hint=_MOONCAKE_HINT)
    pairs = np.asarray(lengths, dtype=np.int64)
    return Trace(stamps, np.arange(len(stamps), dtype=np.int64), np.asarray(numbers), pairs[:, 0], pairs[:, 1])


def _tokens(row: dict, key: str, most: int, path: Path, number: int, error: type[InputError]) -> int:
    value = row.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= most:
        found = "missing" if value is None else json.dumps(value)[:40]
        raise error(
            f"{path}: line {number}: `{key}` is {found}, not a whole number of tokens from 1 to {most:,}",
            hint=_MOONCAKE_HINT,
        )
    return value


def check_replayable(
    trace: Trace, path: str | Path, speedup: float, payload_requests: int, error: type[InputError] = InputError
) -> None:
    """Refuse a trace the generator cannot replay: a payload index past the payload's requests, more than MAX_RATE
    sends in any second of the replay, a replay longer than MAX_DURATION_S."""
    if trace.indices is not None:
        beyond = np.flatnonzero(trace.indices >= payload_requests)
        if beyond.size:
            k = int(beyond[0])
            raise error(
                f"{path}: line {trace.lines[k]}: payload index {trace.indices[k]} is not one of the payload's "
                f"{payload_requests} requests (0 to {payload_requests - 1})",
                hint="A payload index counts the payload's requests from 0, in order (payload.texts).",
            )
    times = trace.replay_times(speedup)
    in_a_second = np.searchsorted(times, times + 1.0, side="left") - np.arange(len(times))
    busiest = int(np.argmax(in_a_second))
    if in_a_second[busiest] > MAX_RATE:
        raise error(
            f"{path}: line {trace.lines[busiest]}: {int(in_a_second[busiest]):,} sends in the second of replay "
            f"starting here (speedup {speedup:g}), beyond the generator's ceiling of {MAX_RATE:,.0f} requests/s",
            hint="Lower traffic.trace.speedup, or thin the trace.",
        )
    if trace.duration(speedup) > MAX_DURATION_S:
        raise error(
            f"{path}: line {trace.lines[-1]}: the replay lasts {trace.duration(speedup):,.0f} s at speedup "
            f"{speedup:g}, over the {MAX_DURATION_S:,.0f} s a load level may last",
            hint="Raise traffic.trace.speedup, or cut the trace.",
        )


def _timestamp(field: str, path: Path, number: int, error: type[InputError]) -> float:
    try:
        value = float(field)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value):
        raise error(f"{path}: line {number}: timestamp {field!r} is not a number of seconds", _HINT)
    return value


def _index(field: str, path: Path, number: int, error: type[InputError]) -> int:
    try:
        value = int(field)
    except ValueError:
        value = -1
    if value < 0:
        raise error(f"{path}: line {number}: payload index {field!r} is not a whole number >= 0", _HINT)
    return value
