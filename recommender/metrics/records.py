"""The records a load run produces and every later step reads: the exact per-request log and the per-second timeline.

Pure numpy, no Locust: the load step writes them, metrics/ cuts them into windows, the store keeps what they yield.
Kept apart from load/ so that metrics/ reads them without importing the load step.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import numpy as np

REQUEST_DTYPES: dict[str, type[np.generic]] = {
    "t_s": np.float64,
    "latency_us": np.int64,
    "ok": np.bool_,
    "users": np.int32,
}
TIMELINE_DTYPES: dict[str, type[np.generic]] = {
    "t_s": np.float64,
    "users": np.int32,
    "target_users": np.int32,
    "cpu_percent": np.float64,
}


def _typed(arrays: dict[str, np.ndarray], dtypes: dict[str, type[np.generic]]) -> dict[str, np.ndarray]:
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
        for name, array in _typed(columns_of(self), REQUEST_DTYPES).items():
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
        np.savez(path, **present_columns(columns_of(self)))

    @classmethod
    def from_npz(cls, path: Path) -> RequestLog:
        with np.load(path) as data:
            return cls(**request_columns(data))


@dataclass(frozen=True)
class Timeline:
    """One row per second of the run: actual and target users, and the load generator's own CPU %.

    `cpu_percent` is all generator processes together (% of one core); `cpu_max_percent` the busiest single generator
    process (Locust's distributed mode: one value per worker, the highest kept; None: one process, the same figure).
    """

    t_s: np.ndarray
    users: np.ndarray
    target_users: np.ndarray
    cpu_percent: np.ndarray
    cpu_max_percent: np.ndarray | None = None

    def __post_init__(self) -> None:
        for name, array in _typed(columns_of(self), TIMELINE_DTYPES).items():
            object.__setattr__(self, name, array)
        if self.cpu_max_percent is not None:
            busiest = np.asarray(self.cpu_max_percent, dtype=np.float64)
            if len(busiest) != len(self.t_s):
                raise ValueError(f"cpu_max_percent has {len(busiest)} rows, t_s {len(self.t_s)}")
            object.__setattr__(self, "cpu_max_percent", busiest)

    @property
    def busiest_cpu(self) -> np.ndarray:
        """CPU % of the busiest generator process, per second."""
        return self.cpu_percent if self.cpu_max_percent is None else self.cpu_max_percent


def present_columns(columns: Mapping[str, np.ndarray | None]) -> dict[str, np.ndarray]:
    return {name: array for name, array in columns.items() if array is not None}


def request_columns(data) -> dict[str, np.ndarray]:
    columns = {name: data[name] for name in REQUEST_DTYPES}
    return columns | ({"late_us": data["late_us"]} if "late_us" in data.files else {})


def columns_of(instance: object) -> dict[str, np.ndarray]:
    """Field name -> value without dataclasses.asdict's deep copy of every array."""
    return {name: getattr(instance, name) for name in instance.__dataclass_fields__}  # type: ignore[attr-defined]


Records = TypeVar("Records", RequestLog, Timeline)


def joined(parts: list[tuple[float, Records]]) -> Records:
    """Records of load runs that followed each other as one: each part's `t_s` shifted by its offset (s), columns
    concatenated; an optional column is kept only when every part has it."""
    first = parts[0][1]
    columns = {}
    for name, value in columns_of(first).items():
        values = [columns_of(part)[name] for _, part in parts]
        if value is None or any(v is None for v in values):
            continue
        if name == "t_s":
            values = [v + offset for (offset, _), v in zip(parts, values, strict=True)]
        columns[name] = np.concatenate(values)
    return type(first)(**columns)
