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
    """One row per request: send time from test start (s), exact latency (us), success, active users at send."""

    t_s: np.ndarray
    latency_us: np.ndarray
    ok: np.ndarray
    users: np.ndarray

    def __post_init__(self) -> None:
        for name, array in _typed(_columns(self), _REQUEST_DTYPES).items():
            object.__setattr__(self, name, array)

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def failures(self) -> int:
        return int(np.count_nonzero(~self.ok))

    def to_npz(self, path: Path) -> None:
        np.savez(path, **_columns(self))

    @classmethod
    def from_npz(cls, path: Path) -> "RequestLog":
        with np.load(path) as data:
            return cls(**{name: data[name] for name in _REQUEST_DTYPES})


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
    """Everything one load run measured. `started_at` is the wall-clock (epoch s) of t_s = 0."""

    requests: RequestLog
    timeline: Timeline
    started_at: float
    duration_s: float

    def to_npz(self, path: Path) -> None:
        """One file: request arrays under their names, timeline arrays prefixed `timeline_`."""
        timeline = {f"timeline_{name}": array for name, array in _columns(self.timeline).items()}
        meta = {"started_at": np.float64(self.started_at), "duration_s": np.float64(self.duration_s)}
        np.savez(path, **_columns(self.requests), **timeline, **meta)

    @classmethod
    def from_npz(cls, path: Path) -> "LoadResult":
        with np.load(path) as data:
            return cls(
                requests=RequestLog(**{name: data[name] for name in _REQUEST_DTYPES}),
                timeline=Timeline(**{name: data[f"timeline_{name}"] for name in _TIMELINE_DTYPES}),
                started_at=float(data["started_at"]),
                duration_s=float(data["duration_s"]),
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


def _columns(instance: object) -> dict[str, np.ndarray]:
    """Field name -> value without dataclasses.asdict's deep copy of every array."""
    return {name: getattr(instance, name) for name in instance.__dataclass_fields__}  # type: ignore[attr-defined]
