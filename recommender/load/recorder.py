"""Bounded-memory accumulation of per-request rows and per-second samples inside the load generator.

Typed `array.array` columns (21 bytes per request, amortised O(1) append), turned into numpy
with one buffer copy (no Python objects) when the run ends. No Locust import: unit-testable on its own.
"""

from __future__ import annotations

from array import array
from typing import Any

import numpy as np

from recommender.load.result import LoadResult
from recommender.metrics.records import RequestLog, Timeline

_NUMPY = {"d": np.float64, "q": np.int64, "i": np.int32, "b": np.int8}


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
        self.busiest: array[float] = array(
            "d"
        )  # distributed mode: the busiest worker's CPU % per sample (empty: one process)
        self.timeline: dict[str, array[Any]] = {  # float ("d") and int ("i") columns
            name: array(code)
            for name, code in (("t_s", "d"), ("users", "i"), ("target_users", "i"), ("cpu_percent", "d"))
        }

    def __len__(self) -> int:
        return len(self.t_s)

    def record(self, t_s: float, latency_us: int, ok: bool, users: int, late_us: int | None = None) -> None:
        if late_us is not None:
            self.late_us.append(late_us)
        self.t_s.append(t_s)
        self.latency_us.append(latency_us)
        self.ok.append(ok)
        self.users.append(users)
        self.failures += not ok

    def rows_since(self, mark: int) -> dict[str, bytes]:
        """The rows recorded from index `mark` on, as raw column bytes (a distributed worker sends these to the
        master)."""
        columns: dict[str, array[Any]] = {
            "t_s": self.t_s,
            "latency_us": self.latency_us,
            "ok": self.ok,
            "users": self.users,
        }
        chunk = {name: column[mark:].tobytes() for name, column in columns.items()}
        if len(self.late_us):
            chunk["late_us"] = self.late_us[mark:].tobytes()
        return chunk

    def extend(self, chunk: dict[str, bytes]) -> None:
        """Append rows sent by `rows_since` (the master collects its workers' requests this way)."""
        columns: dict[str, array[Any]] = {
            "t_s": self.t_s,
            "latency_us": self.latency_us,
            "ok": self.ok,
            "users": self.users,
            "late_us": self.late_us,
        }
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
        columns: dict[str, array[Any]] = {
            "t_s": self.t_s,
            "latency_us": self.latency_us,
            "ok": self.ok,
            "users": self.users,
        }
        if len(self.late_us):
            columns["late_us"] = self.late_us
        return RequestLog(**{name: _numpy(column)[order] for name, column in columns.items()})

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
