"""The Locust side of the load driver. Loaded ONLY by the child `python -m locust -f <this file>`.

Never import this module from the main process: importing locust monkey-patches the standard
library with gevent. Settings arrive as environment variables (see config.ChildConfig).

- `InferenceUser`: closed loop (no wait), POSTs KServe v2 JSON to /v2/models/<model>/infer and
  records every request exactly (time.perf_counter_ns, microseconds), not from Locust's stats.
- `PhaseShape`: the user count follows the clock through shapes.users_at on every tick.
- A sampler greenlet records users and this process's CPU % once per second and writes the
  progress file; the result `.npz` is written at test stop.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time
from collections.abc import Iterator

import gevent
import psutil
from locust import FastHttpUser, LoadTestShape, constant, events, task
from locust.env import Environment

from recommender.load.config import ChildConfig
from recommender.load.recorder import RequestRecorder
from recommender.load.result import LoadProgress
from recommender.load.shapes import total_duration, users_at

_SPAWN_RATE = 10_000  # users per second handed to Locust: large, so the count follows the clock, not a ramp
_SAMPLE_OFFSET_S = 0.5  # sample mid-second, away from the shape's whole-second ticks


def _load_bodies(path: os.PathLike[str]) -> Iterator[bytes]:
    with open(path, encoding="utf-8") as file:
        payload = json.load(file)
    bodies = payload if isinstance(payload, list) else [payload]
    if not bodies:
        raise ValueError(f"{path} holds an empty list of request bodies")
    return itertools.cycle([json.dumps(body).encode() for body in bodies])


def _is_inference(response: object) -> bool:
    """HTTP 200 and a JSON object naming "outputs" (a byte search: parsing large outputs would load the generator)."""
    content = getattr(response, "content", None) or b""
    return getattr(response, "status_code", 0) == 200 and content[:1] == b"{" and b'"outputs"' in content


class LoadRun:
    """State of one run in the child: clock, bodies, recorder, sampler. Attached to the Locust environment."""

    def __init__(self, config: ChildConfig, bodies: Iterator[bytes], environment: Environment) -> None:
        self.config = config
        self.environment = environment
        self.bodies = bodies
        self.path = f"/v2/models/{config.model_name}/infer"
        self.headers = {"Content-Type": "application/json", **config.headers}
        self.total_s = total_duration(config.phases)
        self.recorder = RequestRecorder()
        self.process = psutil.Process()
        self.t0_ns: int | None = None
        self.started_at = 0.0
        self.sampler: gevent.Greenlet | None = None
        self.finished = False

    def start(self) -> None:
        """Start the clock (t_s = 0), the CPU measurement and the per-second sampler; called on the shape's first tick."""
        self.t0_ns, self.started_at = time.perf_counter_ns(), time.time()
        self.process.cpu_percent(None)  # prime: the next call measures from here
        self.sampler = gevent.spawn(self._sample_every_second)

    def elapsed_s(self) -> float:
        return (time.perf_counter_ns() - self.t0_ns) / 1e9

    def record(self, sent_ns: int, done_ns: int, ok: bool, users: int) -> None:
        self.recorder.record((sent_ns - self.t0_ns) / 1e9, (done_ns - sent_ns) // 1000, ok, users)

    def _sample_every_second(self) -> None:
        for second in itertools.count():
            gevent.sleep(max(0.0, second + _SAMPLE_OFFSET_S - self.elapsed_s()))
            t_s = self.elapsed_s()
            users = self.environment.runner.user_count
            self.recorder.sample(t_s, users, users_at(self.config.phases, t_s) or 0, self.process.cpu_percent(None))
            self._write_progress(t_s, users)

    def _write_progress(self, t_s: float, users: int) -> None:
        recorder = self.recorder
        LoadProgress(t_s, self.total_s, users, len(recorder), recorder.failures).write(self.config.progress_path)

    def finish(self) -> None:
        """Write the result file once, at test stop (idempotent: test_stop and quitting both call it)."""
        if self.finished:
            return
        self.finished = True
        if self.sampler is not None:
            self.sampler.kill(block=True)
        duration = self.elapsed_s() if self.t0_ns is not None else 0.0
        self._write_progress(duration, self.environment.runner.user_count if self.environment.runner else 0)
        self.recorder.result(self.started_at, duration).to_npz(self.config.result_path)


def _not_spawn_rate_warning(record: logging.LogRecord) -> bool:
    """Locust warns on every tick above 100 users/s; our high rate is deliberate (the count follows the clock)."""
    return "spawn rate is very high" not in record.getMessage()


@events.init.add_listener
def _attach_run(environment: Environment, **_kwargs: object) -> None:
    logging.getLogger("locust.runners").addFilter(_not_spawn_rate_warning)
    config = ChildConfig.from_env(os.environ)
    environment.recommender_run = LoadRun(config, _load_bodies(config.payload_path), environment)


@events.test_stop.add_listener
@events.quitting.add_listener
def _finish_run(environment: Environment, **_kwargs: object) -> None:
    environment.recommender_run.finish()


class InferenceUser(FastHttpUser):
    """One closed-loop client: send, wait for the answer, send again."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.run = self.environment.recommender_run

    @task
    def infer(self) -> None:
        run = self.run
        users = self.environment.runner.user_count
        sent_ns = time.perf_counter_ns()
        with self.client.post(run.path, data=next(run.bodies), headers=run.headers, catch_response=True) as response:
            done_ns = time.perf_counter_ns()
            ok = _is_inference(response)
            if not ok:
                response.failure(f"HTTP {response.status_code}: {response.error or (response.text or '')[:200]}")
        run.record(sent_ns, done_ns, ok, users)


class PhaseShape(LoadTestShape):
    """SageMaker phases: the target user count is recomputed from the clock on every tick."""

    def tick(self) -> tuple[int, float] | None:
        run = self.runner.environment.recommender_run
        if run.t0_ns is None:
            run.start()
        users = users_at(run.config.phases, run.elapsed_s())
        return None if users is None else (users, _SPAWN_RATE)
