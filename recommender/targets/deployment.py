"""The Deployment every target's `deploy` returns: a running endpoint, with its lifecycle held here once.

- Leaving `with` always tears the endpoint down; teardown is idempotent and no signal (Ctrl-C, SIGTERM, SIGHUP)
  cuts it short; a teardown failure never hides what ended the block.
- A start that fails (Ctrl-C included) tears down what was started, then raises the start's failure, with a
  teardown failure added to it as a note (`starting`).
- Readiness, statistics and the probe inference go through Triton's HTTP API (triton_client.py); server
  processes are [] and cloud metrics {} unless a target says otherwise.

A target's deployment (a dataclass subclass) holds only what differs: how it starts (in its target's `deploy`,
inside `starting()`), how it stops (`_stop`), where the endpoint is (`endpoint`, `model_name`), and, where it has
them, its server processes, log, metrics URL, cloud metrics and a liveness check while it starts.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Self

import psutil

from recommender.errors import RecommenderError, TargetError
from recommender.targets.triton_client import TritonClient
from recommender.targets.wire import KSERVE, Wire

READY_POLL_TIMEOUT_S = 2.0  # one readiness request while waiting for the model


class Deployment:
    """A running endpoint serving one model. Use as a context manager: leaving it always tears the endpoint down."""

    endpoint: str  # base URL of the KServe v2 HTTP API, e.g. http://127.0.0.1:8000, or sagemaker://ENDPOINT_NAME
    model_name: str
    metrics_url: str | None = None  # Prometheus /metrics, when the target has one
    log_path: Path | None = None  # the server log, kept in the run directory
    gpu_uuids: tuple[str, ...] = ()  # the GPUs its model runs on (NVML UUIDs); () where none of this host's does
    headers: Mapping[str, str] = MappingProxyType({})  # sent with this process's requests (an OpenAI endpoint's key)
    api_key_env: str | None = None  # the variable holding that key: the load's processes read it from their own env

    def __post_init__(self) -> None:  # subclasses are dataclasses; one adding its own __post_init__ calls this
        self._teardown_lock = threading.Lock()
        self._torn_down = False

    @property
    def triton(self) -> TritonClient:
        """The model on the server, through Triton's HTTP API."""
        return TritonClient(self.endpoint, self.model_name, hint=self.failure_hint)

    @property
    def wire(self) -> Wire:
        """How requests and answers look: KServe v2 JSON (Triton); an OpenAI-compatible server says otherwise."""
        return KSERVE

    @property
    def load_url(self) -> str:
        """What the load generator is pointed at (the endpoint; a SageMaker endpoint adds region and API URL)."""
        return self.endpoint

    def statistics(self) -> dict[str, Any]:
        """Triton's statistics JSON of the model (see metrics/triton_stats.py); TargetError when unavailable."""
        return self.triton.statistics()

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict:
        """One inference before the load; returns the answer (with `outputs`) or raises TargetError saying what came
        back."""
        return self.triton.infer(body, timeout_s)

    def server_pids(self) -> list[int]:
        """The server and every backend stub process, where they run on this host."""
        return []

    def cloud_metrics(self, start: datetime, end: datetime) -> dict[str, Any]:
        """The cloud provider's metrics of the endpoint for a window ({} where there is no cloud)."""
        return {}

    def failure_hint(self) -> str:
        """Where to look when the server fails."""
        return f"See the server log {self.log_path}." if self.log_path else "See the server's log."

    @contextlib.contextmanager
    def starting(self) -> Iterator[Self]:
        """Wrap the start: on any failure (Ctrl-C included) tear down, then re-raise; a teardown failure becomes a
        note."""
        try:
            yield self
        except BaseException as error:
            try:
                self.teardown()
            except TargetError as cleanup:  # keep the start failure as the error; mention the cleanup one
                error.add_note(f"teardown also failed: {cleanup.message}")
            raise

    @contextlib.contextmanager
    def watched(self) -> Iterator[None]:
        """Around the load: TargetError, naming the process, when a server process (server or backend stub) running
        at the start died before the end; it replaces the block's own failure, which it caused (kept as the cause)."""
        processes = _processes(self.server_pids())
        try:
            yield
        except RecommenderError as failure:
            self._raise_if_died(processes, failure)
            raise
        self._raise_if_died(processes, None)

    def _raise_if_died(self, processes: list[psutil.Process], failure: BaseException | None) -> None:
        dead = [f"{name} (pid {proc.pid})" for proc, name in processes if not _alive(proc)]
        if dead:
            raise TargetError(
                f"the server crashed during the load: {', '.join(dead)} died", hint=self.failure_hint()
            ) from failure

    def wait_until_ready(self, timeout_s: float, poll_s: float = 0.2) -> None:
        """Poll Triton until the server and the model are ready; TargetError when the server stops or time runs out."""
        deadline = time.monotonic() + timeout_s
        while True:
            self._check_running()
            if time.monotonic() > deadline:
                raise TargetError(
                    f"{self.model_name!r} was not ready after {timeout_s:.0f} s", hint=self.failure_hint()
                )
            if self._answers_ready():
                return
            time.sleep(poll_s)

    def teardown(self) -> None:
        """Stop the endpoint and release what it holds. Idempotent; Ctrl-C waits until it is done, then is raised."""
        with self._teardown_lock, _interrupts_deferred():
            if not self._torn_down:
                self._stop()
                self._torn_down = True

    def __enter__(self) -> Self:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        """Tear down; a teardown failure never hides what ended the block (an interruption, a load failure): it
        becomes a note on that exception, and is raised only when the block ended normally."""
        try:
            self.teardown()
        except TargetError as cleanup:
            if exc is None:
                raise
            exc.add_note(f"teardown also failed: {cleanup.message}")

    def _stop(self) -> None:
        """Stop what this deployment started (called once by `teardown`, again only if it raised)."""
        raise NotImplementedError

    def _check_running(self) -> None:
        """While waiting for readiness: raise TargetError when the server has stopped (nothing to check by default)."""

    def _answers_ready(self) -> bool:
        try:
            return replace(self.triton, timeout_s=READY_POLL_TIMEOUT_S, hint="").ready()  # a miss is not reported
        except TargetError:  # not answering yet
            return False


def _processes(pids: list[int]) -> list[tuple[psutil.Process, str]]:
    found = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            found.append((proc, proc.name()))
        except psutil.NoSuchProcess:
            pass
    return found


def _alive(proc: psutil.Process) -> bool:
    """Still the same process (psutil compares the start time) and not a zombie."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


DEFERRED_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def _interrupts_deferred() -> Iterator[None]:
    """Hold back Ctrl-C, SIGTERM and SIGHUP (main thread only) until the block is done, then hand the first one to
    the handler that was in place (the CLI's raises errors.Interrupted): teardown is never cut short."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []
    previous: dict[int, Any] = {
        signum: signal.signal(signum, lambda signum, frame: received.append(signum)) for signum in DEFERRED_SIGNALS
    }
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if received:
        _deliver(received[0], previous[received[0]])


def _deliver(signum: int, handler: Any) -> None:
    """Run the handler a deferred signal would have reached: a Python handler is called, the default one re-raised."""
    if callable(handler):
        handler(signum, None)
    elif handler == signal.SIG_DFL:
        signal.raise_signal(signum)
