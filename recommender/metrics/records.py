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
# Generation (docs/design.md "Generation"): optional per-request columns, all present or none. Token times are
# ragged, so every streamed chunk's time from its request's send is one flat array, `chunk_us`, and each request
# names its slice of it (`chunk_start`, `chunk_count`): rows can be selected or reordered without touching it.
GENERATION_DTYPES: dict[str, type[np.generic]] = {
    "ttft_us": np.int64,  # first content chunk, from the send (open loop: from the scheduled send); -1: none came
    "input_tokens": np.int32,  # prompt tokens: the server's `usage`, else counted locally; -1: unknown
    "output_tokens": np.int32,  # generated tokens: the server's `usage`, else counted locally (content chunks)
    "tokens_counted": np.bool_,  # True: counted here (the server sent no usage); False: the server's usage
    "finished": np.bool_,  # the stream ended cleanly: a finish_reason, then [DONE]
    "chunk_start": np.int64,  # index of the request's first chunk time in chunk_us
    "chunk_count": np.int32,  # how many chunk times it has there
}
CHUNK_DTYPE = np.int64  # chunk_us: every content chunk's arrival, us from its request's send
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

    Generation (a streamed answer): the GENERATION_DTYPES columns, all set or all None, and the flat `chunk_us`;
    `latency_us` is then the end-to-end latency (the stream's end).
    """

    t_s: np.ndarray
    latency_us: np.ndarray
    ok: np.ndarray
    users: np.ndarray
    late_us: np.ndarray | None = None
    ttft_us: np.ndarray | None = None
    input_tokens: np.ndarray | None = None
    output_tokens: np.ndarray | None = None
    tokens_counted: np.ndarray | None = None
    finished: np.ndarray | None = None
    chunk_start: np.ndarray | None = None
    chunk_count: np.ndarray | None = None
    chunk_us: np.ndarray | None = None

    def __post_init__(self) -> None:
        columns = columns_of(self)
        for name, array in _typed(columns, REQUEST_DTYPES).items():
            object.__setattr__(self, name, array)
        optional = {"late_us": np.int64} | GENERATION_DTYPES
        for name, dtype in optional.items():
            if columns[name] is None:
                continue
            array = np.asarray(columns[name], dtype=dtype)
            if len(array) != len(self.t_s):
                raise ValueError(f"{name} has {len(array)} rows, t_s {len(self.t_s)}")
            object.__setattr__(self, name, array)
        given = [name for name in (*GENERATION_DTYPES, "chunk_us") if columns[name] is not None]
        if given and len(given) != len(GENERATION_DTYPES) + 1:
            missing = sorted(set(GENERATION_DTYPES) | {"chunk_us"} - set(given))
            raise ValueError(f"generation columns come together: {', '.join(missing)} missing")
        if self.chunk_us is not None:
            object.__setattr__(self, "chunk_us", np.asarray(self.chunk_us, dtype=CHUNK_DTYPE))

    def __len__(self) -> int:
        return len(self.t_s)

    @property
    def generative(self) -> bool:
        """The requests were streamed generations (token columns present)."""
        return self.ttft_us is not None

    def rows(self, keep: np.ndarray) -> RequestLog:
        """The requests `keep` selects (a boolean mask or indices), every per-request column with them; the flat
        chunk times stay whole (each row still names its slice)."""
        columns = {
            name: None if value is None or name == "chunk_us" else value[keep]
            for name, value in columns_of(self).items()
        }
        return RequestLog(**(columns | {"chunk_us": self.chunk_us}))

    def chunk_times_us(self, row: int) -> np.ndarray:
        """Request `row`'s chunk arrival times, us from its send (empty when it streamed none)."""
        if self.chunk_us is None or self.chunk_start is None or self.chunk_count is None:
            return np.empty(0, dtype=CHUNK_DTYPE)
        start = int(self.chunk_start[row])
        return self.chunk_us[start : start + int(self.chunk_count[row])]

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
    optional = ("late_us", *GENERATION_DTYPES, "chunk_us")
    return columns | {name: data[name] for name in optional if name in data.files}


def columns_of(instance: object) -> dict[str, np.ndarray]:
    """Field name -> value without dataclasses.asdict's deep copy of every array."""
    return {name: getattr(instance, name) for name in instance.__dataclass_fields__}  # type: ignore[attr-defined]


Records = TypeVar("Records", RequestLog, Timeline)


def joined(parts: list[tuple[float, Records]]) -> Records:
    """Records of load runs that followed each other as one: each part's `t_s` shifted by its offset (s), columns
    concatenated; an optional column is kept only when every part has it (the generation columns as one: each part's
    `chunk_start` shifted past the chunk times before it)."""
    first = parts[0][1]
    columns = {}
    for name, value in columns_of(first).items():
        values = [columns_of(part)[name] for _, part in parts]
        if value is None or any(v is None for v in values):
            continue
        if name == "t_s":
            values = [v + offset for (offset, _), v in zip(parts, values, strict=True)]
        if name == "chunk_start":
            before = np.cumsum([0] + [len(columns_of(part)["chunk_us"]) for _, part in parts[:-1]])
            values = [v + shift for shift, v in zip(before, values, strict=True)]
        columns[name] = np.concatenate(values)
    generation = ("ttft_us", *GENERATION_DTYPES, "chunk_us")
    if not all(name in columns for name in generation):
        columns = {name: value for name, value in columns.items() if name not in generation}
    return type(first)(**columns)
