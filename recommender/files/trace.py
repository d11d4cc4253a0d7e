"""Trace replay: a file of request timestamps (and optionally a payload index per request) as an open-loop schedule.

A trace file is UTF-8 text, one request a line: a timestamp in seconds, optionally followed by a comma (or spaces)
and the request's payload index, an index into `load/payload.py::request_token_ids(payload)` (the payload's requests
in order; the load child's request bodies are in the same order). Blank lines and lines starting with `#` are
skipped. Timestamps are in any origin (epoch seconds or seconds from the start) and must not decrease; the replay
starts at the first one and sends request k at `(t_k - t_0) / speedup`. Lines without an index take the payload's
requests in turn; an index is on every line or on none.

`read_trace` parses through the project's hardened loader (files/document.py: size cap, binary, encoding);
`check_replayable` refuses a trace the generator cannot replay. Both raise an `InputError` naming the file and the
line. No Locust and no pydantic here: the load child reads the trace itself (`load/shapes.py` `TrafficPlan.sends`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from recommender.errors import InputError
from recommender.files.document import read_text

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


def read_trace(path: str | Path, error: type[InputError] = InputError) -> Trace:
    """Parse a trace file; unsorted timestamps, a bad number, a negative index or a mixed index column are an `error`
    naming the line."""
    path = Path(path)
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
    if len(times) < 2:
        raise error(f"{path}: holds {len(times)} request timestamp(s); a trace needs at least 2", hint=_HINT)
    if times[-1] == times[0]:
        raise error(
            f"{path}: line {lines[-1]}: every timestamp is {times[0]:g}; a trace needs time between its first and "
            "last request",
            hint=_HINT,
        )
    stamps = np.asarray(times, dtype=float)
    return Trace(stamps - stamps[0], np.asarray(indices, dtype=np.int64) if indices else None, np.asarray(lines))


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
