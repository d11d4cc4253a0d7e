"""What one load run produces: the exact per-request log, the per-second timeline, and progress.

Pure numpy; shared by the Locust child (which writes the `.npz`) and the parent (which reads it),
so the file format is defined once, here.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

_REQUEST_DTYPES = {"t_s": np.float64, "latency_us": np.int64, "ok": np.bool_, "users": np.int32}
_TIMELINE_DTYPES = {"t_s": np.float64, "users": np.int32, "target_users": np.int32, "cpu_percent": np.float64}


def _typed(arrays: dict[str, np.ndarray], dtypes: dict[str, type]) -> dict[str, np.ndarray]:
    lengths = {len(arrays[name]) for name in dtypes}
    if len(lengths) > 1:
        raise ValueError(f"arrays of unequal length: { {name: len(arrays[name]) for name in dtypes} }")
    return {name: np.asarray(arrays[name], dtype=dtype) for name, dtype in dtypes.items()}


@dataclass(frozen=True)
class RequestLog:
    """One row per request: send time from test start (s), exact latency (us), success, active users at send.

    Open loop: `t_s` is the SCHEDULED send time, `latency_us` is timed from it, and `late_us` says how long after
    its schedule the request really went out (None for closed loop).
    """

    t_s: np.ndarray
    latency_us: np.ndarray
    ok: np.ndarray
    users: np.ndarray
    late_us: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name, array in _typed(_columns(self), _REQUEST_DTYPES).items():
            object.__setattr__(self, name, array)
        if self.late_us is not None:
            late = np.asarray(self.late_us, dtype=np.int64)
            if len(late) != len(self.t_s):
                raise ValueError(f"late_us has {len(late)} rows, t_s {len(self.t_s)}")
            object.__setattr__(self, "late_us", late)

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def failures(self) -> int:
        return int(np.count_nonzero(~self.ok))

    def to_npz(self, path: Path) -> None:
        np.savez(path, **_present(_columns(self)))

    @classmethod
    def from_npz(cls, path: Path) -> "RequestLog":
        with np.load(path) as data:
            return cls(**_request_columns(data))


@dataclass(frozen=True)
class Timeline:
    """One row per second of the run: actual and target users, and the load generator's own CPU %."""

    t_s: np.ndarray
    users: np.ndarray
    target_users: np.ndarray
    cpu_percent: np.ndarray

    def __post_init__(self) -> None:
        for name, array in _typed(_columns(self), _TIMELINE_DTYPES).items():
            object.__setattr__(self, name, array)


@dataclass(frozen=True)
class LoadResult:
    """Everything one load run measured. `started_at` is the wall-clock (epoch s) of t_s = 0.

    `stop_reason` says why the generator stopped before the end of the traffic (None: it ran to the end).
    """

    requests: RequestLog
    timeline: Timeline
    started_at: float
    duration_s: float
    stop_reason: str | None = None

    def to_npz(self, path: Path) -> None:
        """One file: request arrays under their names, timeline arrays prefixed `timeline_`."""
        timeline = {f"timeline_{name}": array for name, array in _columns(self.timeline).items()}
        meta = {"started_at": np.float64(self.started_at), "duration_s": np.float64(self.duration_s),
                "stop_reason": np.str_(self.stop_reason or "")}
        np.savez(path, **_present(_columns(self.requests)), **timeline, **meta)

    @classmethod
    def from_npz(cls, path: Path) -> "LoadResult":
        with np.load(path) as data:
            return cls(
                requests=RequestLog(**_request_columns(data)),
                timeline=Timeline(**{name: data[f"timeline_{name}"] for name in _TIMELINE_DTYPES}),
                started_at=float(data["started_at"]),
                duration_s=float(data["duration_s"]),
                stop_reason=str(data["stop_reason"]) or None if "stop_reason" in data.files else None,
            )


@dataclass(frozen=True)
class LoadProgress:
    """A heartbeat from the running load generator, about once per second."""

    elapsed_s: float
    total_s: float
    users: int
    requests: int
    failures: int

    def write(self, path: Path) -> None:
        """Atomic write (temp file + rename) so a reader never sees half a file."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(asdict(self)))
        os.replace(tmp, path)

    @classmethod
    def read(cls, path: Path) -> "LoadProgress | None":
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None


def _present(columns: dict[str, np.ndarray | None]) -> dict[str, np.ndarray]:
    return {name: array for name, array in columns.items() if array is not None}


def _request_columns(data) -> dict[str, np.ndarray]:
    columns = {name: data[name] for name in _REQUEST_DTYPES}
    return columns | ({"late_us": data["late_us"]} if "late_us" in data.files else {})


def _columns(instance: object) -> dict[str, np.ndarray]:
    """Field name -> value without dataclasses.asdict's deep copy of every array."""
    return {name: getattr(instance, name) for name in instance.__dataclass_fields__}  # type: ignore[attr-defined]
