"""The parent -> Locust child contract: one run's settings, passed as environment variables.

Defined once here so `runner.py` (writer) and `locustfile.py` (reader) cannot drift apart. In Locust's distributed
mode only the master reads the environment; it sends each worker what a worker needs (`to_message`: the model, the
plan and the request bodies) over Locust's own message channel, so a worker on another host needs no files from
this one (distributed.py). That channel is plain text and unauthenticated, so an API key never crosses it, nor the
environment this module writes: every process (the only one, the master, each worker) reads the key itself from the
variable `api_key_env` names, in its own environment (`request_headers`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from recommender.credentials import api_key, bearer
from recommender.load.shapes import TrafficPlan
from recommender.metrics.rules import Rules

_PREFIX = "RECOMMENDER_LOAD_"
# a worker that cannot take part (its host lacks the API key's variable) leaves the run and exits with this code, and
# the master ends the run with it too, its log saying why after WORKER_LEFT_LINE
WORKER_LEFT_EXIT = 3
WORKER_LEFT_LINE = "a load worker left the run:"


@dataclass(frozen=True)
class ChildConfig:
    """What the Locust child needs to run and report one load test."""

    model_name: str
    payload_path: Path  # JSON: one request body (KServe v2 or OpenAI embeddings), or a list of them (sent in turn)
    plan: TrafficPlan  # the compiled traffic shape (levels; open loop: arrival schedule)
    result_path: Path  # .npz written at test stop (see result.LoadResult.to_npz)
    progress_path: Path  # JSON heartbeat written about once per second (see result.LoadProgress)
    api_key_env: str = ""  # the variable holding the endpoint's API key ("": none), read by each process from its env
    rules: Rules | None = None  # windows and stop conditions; None: run the whole plan
    path: str = ""  # where requests are POSTed ("": the KServe v2 infer path of `model_name`)
    answer_key: str = "outputs"  # the JSON key every good answer holds (KServe: outputs; OpenAI embeddings: data)
    wire: str = "kserve"  # the wire's name (targets/wire.py); a generative one's answers are read per chunk
    stream: bool = True  # a generative wire: the answers stream (server-sent events); False: one JSON answer each

    def to_env(self) -> dict[str, str]:
        return {
            f"{_PREFIX}MODEL": self.model_name,
            f"{_PREFIX}PAYLOAD": str(self.payload_path),
            f"{_PREFIX}PLAN": self.plan.to_json(),
            f"{_PREFIX}RULES": self.rules.to_json() if self.rules else "",
            f"{_PREFIX}RESULT": str(self.result_path),
            f"{_PREFIX}PROGRESS": str(self.progress_path),
            f"{_PREFIX}API_KEY_ENV": self.api_key_env,
            f"{_PREFIX}PATH": self.path,
            f"{_PREFIX}ANSWER_KEY": self.answer_key,
            f"{_PREFIX}WIRE": self.wire,
            f"{_PREFIX}STREAM": "1" if self.stream else "0",
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> ChildConfig:
        try:
            return cls(
                model_name=env[f"{_PREFIX}MODEL"],
                payload_path=Path(env[f"{_PREFIX}PAYLOAD"]),
                plan=TrafficPlan.from_json(env[f"{_PREFIX}PLAN"]),
                result_path=Path(env[f"{_PREFIX}RESULT"]),
                progress_path=Path(env[f"{_PREFIX}PROGRESS"]),
                api_key_env=env.get(f"{_PREFIX}API_KEY_ENV", ""),
                rules=Rules.from_json(env[f"{_PREFIX}RULES"]) if env.get(f"{_PREFIX}RULES") else None,
                path=env.get(f"{_PREFIX}PATH", ""),
                answer_key=env.get(f"{_PREFIX}ANSWER_KEY", "outputs"),
                wire=env.get(f"{_PREFIX}WIRE", "kserve"),
                stream=env.get(f"{_PREFIX}STREAM", "1") == "1",
            )
        except KeyError as missing:
            raise RuntimeError(
                f"{missing.args[0]} is not set: this locustfile is started by recommender.load.runner"
            ) from None

    def request_headers(self, env: Mapping[str, str] | None = None) -> dict[str, str]:
        """What every request carries: the JSON content type and, when `api_key_env` names a variable, the bearer key
        read from `env` (this process's environment); InputError naming the variable when it is unset there."""
        if not self.api_key_env:
            return {"Content-Type": "application/json"}
        where = "this load process's environment"
        return {"Content-Type": "application/json", **bearer(api_key(self.api_key_env, where=where, env=env))}

    def to_message(self) -> dict[str, str]:
        """What a distributed worker needs, as a Locust message's data (the bodies as the payload file's JSON text)."""
        return {
            "model": self.model_name,
            "plan": self.plan.to_json(),
            "api_key_env": self.api_key_env,  # the variable's name: the worker reads the key from its own environment
            "bodies": self.payload_path.read_text(encoding="utf-8"),
            "path": self.path,
            "answer_key": self.answer_key,
            "wire": self.wire,
            "stream": "1" if self.stream else "0",
        }

    @classmethod
    def from_message(cls, data: Mapping[str, str]) -> ChildConfig:
        """A worker's settings from the master's message; a worker writes no result or progress file (os.devnull)."""
        return cls(
            model_name=data["model"],
            payload_path=Path(os.devnull),
            plan=TrafficPlan.from_json(data["plan"]),
            result_path=Path(os.devnull),
            progress_path=Path(os.devnull),
            api_key_env=data.get("api_key_env", ""),
            path=data.get("path", ""),
            answer_key=data.get("answer_key", "outputs"),
            wire=data.get("wire", "kserve"),
            stream=data.get("stream", "1") == "1",
        )
