"""The parent -> Locust child contract: one run's settings, passed as environment variables.

Defined once here so `runner.py` (writer) and `locustfile.py` (reader) cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from recommender.spec import Phase

_PREFIX = "RECOMMENDER_LOAD_"


@dataclass(frozen=True)
class ChildConfig:
    """What the Locust child needs to run and report one load test."""

    model_name: str
    payload_path: Path  # JSON: one KServe v2 request body, or a list of them (sent in turn)
    phases: tuple[Phase, ...]
    result_path: Path  # .npz written at test stop (see result.LoadResult.to_npz)
    progress_path: Path  # JSON heartbeat written about once per second (see result.LoadProgress)
    headers: Mapping[str, str] = field(default_factory=dict)

    def to_env(self) -> dict[str, str]:
        return {
            f"{_PREFIX}MODEL": self.model_name,
            f"{_PREFIX}PAYLOAD": str(self.payload_path),
            f"{_PREFIX}PHASES": json.dumps([phase.model_dump() for phase in self.phases]),
            f"{_PREFIX}RESULT": str(self.result_path),
            f"{_PREFIX}PROGRESS": str(self.progress_path),
            f"{_PREFIX}HEADERS": json.dumps(dict(self.headers)),
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> "ChildConfig":
        try:
            return cls(
                model_name=env[f"{_PREFIX}MODEL"],
                payload_path=Path(env[f"{_PREFIX}PAYLOAD"]),
                phases=tuple(Phase(**phase) for phase in json.loads(env[f"{_PREFIX}PHASES"])),
                result_path=Path(env[f"{_PREFIX}RESULT"]),
                progress_path=Path(env[f"{_PREFIX}PROGRESS"]),
                headers=json.loads(env.get(f"{_PREFIX}HEADERS", "{}")),
            )
        except KeyError as missing:
            raise RuntimeError(f"{missing.args[0]} is not set: this locustfile is started by recommender.load.runner") from None
