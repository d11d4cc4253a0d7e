"""Bounded-memory accumulation of per-request rows and per-second samples inside the load generator.

Typed `array.array` columns (21 bytes per request, amortised O(1) append), turned into numpy
with one buffer copy (no Python objects) when the run ends. No Locust import: unit-testable on its own.
A generative request (a `Generation`, load/token_stream.py) adds the generation columns (34 bytes) and its chunk times
to one flat column (8 bytes per chunk), each row naming its slice (metrics/records.py).
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from recommender.load.result import LoadResult
from recommender.load.token_stream import Generation
from recommender.metrics.records import GENERATION_DTYPES, RequestLog, Timeline

_NUMPY = {"d": np.float64, "q": np.int64, "i": np.int32, "b": np.int8}
_CODES = {np.int64: "q", np.int32: "i", np.bool_: "b"}  # a generation column's numpy type -> its array typecode


def _numpy(column: array) -> np.ndarray:
    """A numpy copy of a typed column (a copy, so the column stays appendable)."""
    return np.frombuffer(column, dtype=_NUMPY[column.typecode]).copy()


class RequestRecorder:
    """Collects what the Locust users and the per-second sampler observe during one run."""

    def __init__(self) -> None:
        self.t_s: array[float] = array("d")
        self.latency_us: array[int] = array("q")
        self.ok: array[int] = array("b")
        self.users: array[int] = array("i")
        self.late_us: array[int] = array("q")  # open loop only: send time minus scheduled time
        self.failures = 0
        # generative requests only (empty otherwise): GENERATION_DTYPES' columns and every content chunk's time
        self.generation: dict[str, array[int]] = {name: array(_CODES[t]) for name, t in GENERATION_DTYPES.items()}
        self.chunk_us: array[int] = array("q")
        self.busiest: array[float] = array(
            "d"
        )  # distributed mode: the busiest worker's CPU % per sample (empty: one process)
        self.timeline: dict[str, array[Any]] = {  # float ("d") and int ("i") columns
            name: array(code)
            for name, code in (("t_s", "d"), ("users", "i"), ("target_users", "i"), ("cpu_percent", "d"))
        }

    def __len__(self) -> int:
        return len(self.t_s)

    def record(
        self,
        t_s: float,
        latency_us: int,
        ok: bool,
        users: int,
        late_us: int | None = None,
        generation: Generation | None = None,
    ) -> None:
        """One request; a generative one with its `generation` (every row of a generative run has one)."""
        if late_us is not None:
            self.late_us.append(late_us)
        if generation is not None:
            self._record_generation(generation)
        self.t_s.append(t_s)
        self.latency_us.append(latency_us)
        self.ok.append(ok)
        self.users.append(users)
        self.failures += not ok

    def _record_generation(self, generation: Generation) -> None:
        columns = self.generation
        columns["ttft_us"].append(generation.ttft_us)
        columns["input_tokens"].append(generation.input_tokens)
        columns["output_tokens"].append(generation.output_tokens)
        columns["tokens_counted"].append(generation.tokens_counted)
        columns["finished"].append(generation.finished)
        columns["chunk_start"].append(len(self.chunk_us))
        columns["chunk_count"].append(len(generation.chunk_us))
        self.chunk_us.extend(generation.chunk_us)

    @property
    def generative(self) -> bool:
        return bool(len(self.generation["ttft_us"]))

    def _columns(self) -> dict[str, array[Any]]:
        """The per-request columns that hold rows: the four always, late_us and the generation columns when used."""
        columns: dict[str, array[Any]] = {
            "t_s": self.t_s,
            "latency_us": self.latency_us,
            "ok": self.ok,
            "users": self.users,
        }
        if len(self.late_us):
            columns["late_us"] = self.late_us
        return columns | (self.generation if self.generative else {})

    def rows_since(self, mark: int) -> dict[str, bytes]:
        """The rows recorded from index `mark` on, as raw column bytes (a distributed worker sends these to the
        master); a generative run's chunk times with them, each row's `chunk_start` counted from the first sent."""
        chunk = {name: column[mark:].tobytes() for name, column in self._columns().items()}
        if self.generative:
            starts = self.generation["chunk_start"]
            base = starts[mark] if mark < len(starts) else len(self.chunk_us)
            chunk["chunk_start"] = (_numpy(starts)[mark:] - base).tobytes()
            chunk["chunk_us"] = self.chunk_us[base:].tobytes()
        return chunk

    def extend(self, chunk: dict[str, bytes]) -> None:
        """Append rows sent by `rows_since` (the master collects its workers' requests this way)."""
        columns: dict[str, array[Any]] = {
            "t_s": self.t_s,
            "latency_us": self.latency_us,
            "ok": self.ok,
            "users": self.users,
            "late_us": self.late_us,
            **self.generation,
            "chunk_us": self.chunk_us,
        }
        if "chunk_start" in chunk:  # the sender's slices, moved past the chunk times already here
            shifted = np.frombuffer(chunk["chunk_start"], dtype=np.int64) + len(self.chunk_us)
            chunk = chunk | {"chunk_start": shifted.tobytes()}
        for name, data in chunk.items():
            columns[name].frombytes(data)
        self.failures += len(chunk["ok"]) - sum(chunk["ok"])

    def sample(self, t_s: float, users: int, target_users: int, cpu_percent: float) -> None:
        for name, value in (
            ("t_s", t_s),
            ("users", users),
            ("target_users", target_users),
            ("cpu_percent", cpu_percent),
        ):
            self.timeline[name].append(value)

    def log(self) -> RequestLog:
        """The requests so far as arrays, sorted by send time (they are recorded as they complete)."""
        order = np.argsort(_numpy(self.t_s), kind="stable")
        rows = {name: _numpy(column)[order] for name, column in self._columns().items()}
        return RequestLog(**rows, chunk_us=_numpy(self.chunk_us) if self.generative else None)

    def result(self, started_at: float, duration_s: float, stop_reason: str | None = None) -> LoadResult:
        """The run as arrays."""
        busiest = _numpy(self.busiest) if len(self.busiest) == len(self.timeline["t_s"]) and len(self.busiest) else None
        timeline = Timeline(**{name: _numpy(column) for name, column in self.timeline.items()}, cpu_max_percent=busiest)
        return LoadResult(
            requests=self.log(),
            timeline=timeline,
            started_at=started_at,
            duration_s=duration_s,
            stop_reason=stop_reason,
        )
