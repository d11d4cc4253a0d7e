"""What one load run produces as a whole: the records with the run's start, duration and stop reason, and progress.

Shared by the Locust child (which writes the `.npz`) and the parent (which reads it), so the file format is
defined once, here; the records themselves are in recommender/metrics/records.py.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from recommender.metrics.records import (
    TIMELINE_DTYPES,
    RequestLog,
    Timeline,
    columns_of,
    present_columns,
    request_columns,
)

PLAN_FILE = "plan.json"  # beside each load.npz: the TrafficPlan that load run ran (its levels, their loads), as JSON
# beside each load.npz: {"url": where its requests were sent, the path included, credentials redacted}; a local
# server's port is chosen per run, so this is the only place that says where it served
SENT_TO_FILE = "sent_to.json"


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
    generators: tuple[
        dict, ...
    ] = ()  # distributed mode: per worker id, index, clock offset and round trip (us), requests
    lost_workers: tuple[dict, ...] = ()  # workers lost mid-run: t_s (load clock), worker, reason

    @property
    def workers(self) -> int:
        """Generator processes that sent requests (1: Locust's single-process mode)."""
        return max(1, len(self.generators))

    def to_npz(self, path: Path) -> None:
        """One file: request arrays under their names, timeline arrays prefixed `timeline_`."""
        timeline = {f"timeline_{name}": array for name, array in present_columns(columns_of(self.timeline)).items()}
        meta = {
            "started_at": np.float64(self.started_at),
            "duration_s": np.float64(self.duration_s),
            "stop_reason": np.str_(self.stop_reason or ""),
            "generators_json": np.str_(json.dumps({"generators": self.generators, "lost": self.lost_workers})),
        }
        np.savez(path, **present_columns(columns_of(self.requests)), **timeline, **meta)

    @classmethod
    def from_npz(cls, path: Path) -> LoadResult:
        with np.load(path) as data:
            return cls(
                requests=RequestLog(**request_columns(data)),
                timeline=Timeline(
                    **{name: data[f"timeline_{name}"] for name in TIMELINE_DTYPES},
                    cpu_max_percent=data["timeline_cpu_max_percent"]
                    if "timeline_cpu_max_percent" in data.files
                    else None,
                ),
                started_at=float(data["started_at"]),
                duration_s=float(data["duration_s"]),
                stop_reason=str(data["stop_reason"]) or None if "stop_reason" in data.files else None,
                **_generators(data),
            )


def _generators(data) -> dict[str, tuple[dict, ...]]:
    if "generators_json" not in data.files:
        return {}
    stored = json.loads(str(data["generators_json"]))
    return {"generators": tuple(stored["generators"]), "lost_workers": tuple(stored["lost"])}


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
    def read(cls, path: Path) -> LoadProgress | None:
        try:
            return cls(**json.loads(path.read_text()))
        except (FileNotFoundError, ValueError, TypeError):
            return None
