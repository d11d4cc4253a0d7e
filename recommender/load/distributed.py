"""Locust's distributed mode, the child side: one master, N workers, every request record merged on the master's clock.

Loaded ONLY by Locust child processes (through locustfile.py); never import it from the main process.

- Settings: a worker reads no local files. On connecting it says hello (a Locust custom message); the master answers
  with the run's settings (config.ChildConfig.to_message: model, plan, request bodies, the name of the API key's
  variable) and the worker builds its run from them, the key read from its own environment (the channel is plain
  text and anyone who reaches the master's port may join: no key crosses it). A worker without that variable says
  so in one line and leaves the run (exit WORKER_LEFT_EXIT); the master ends the run with that reason. The
  target's URL reaches it in Locust's own spawn message (--host). So a worker on another host, started with
  `recommender worker --master HOST:PORT`, runs the same way as a local one.
- Clock: then each worker pings the master `CLOCK_PINGS` times (Locust custom messages) and keeps the ping with
  the shortest round trip: offset = (sent + received) / 2 - master's time (NTP's rule; error <= round trip / 2). The
  worker reports its offset and round trip; the master stores them with the run. On one host both read the same
  CLOCK_MONOTONIC, so the offset is ~0, but it is measured, not assumed.
- Start: the master waits (up to `CLOCK_WAIT_S`) for every expected worker's clock, then sends each worker the
  master's t0 and the worker's index and count; a worker's t0 is that t0 on its own clock (t0 + offset), so the t_s it
  records are on the master's clock. Open loop: worker k sends scheduled sends k, k + N, k + 2N, ...
- Records: every second (and at test stop, before Locust's `client_stopped`) a worker sends the rows recorded since
  its last send, as raw column bytes (a generative run's token columns and chunk times with them: recorder.py
  `rows_since`), with its CPU %; the master appends them to its recorder, so the master's result file holds every
  worker's requests. A worker killed mid-run loses at most its last second of rows.
- Lost workers: the master checks once a second for workers Locust marks missing (no heartbeat for 3 s) or that
  disconnected while the test ran, and records each with the time and the reason.
"""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gevent
from locust.runners import STATE_MISSING, MasterRunner, WorkerRunner

from recommender.errors import InputError
from recommender.load.config import WORKER_LEFT_EXIT, WORKER_LEFT_LINE, ChildConfig

CLOCK_PINGS = 5
CLOCK_WAIT_S = 10.0
CONFIG_WAIT_S = 30.0
FLUSH_S = 1.0
FINAL_WAIT_S = 5.0
_HELLO, _CONFIG, _PING, _PONG, _CLOCK, _START, _ROWS, _FINAL, _LEFT = (
    f"recommender_{name}" for name in ("hello", "config", "ping", "pong", "clock", "start", "rows", "final", "left")
)


@dataclass
class MasterLink:
    """The master's view of its workers: clocks, latest CPU %, rows received, losses."""

    run: Any  # locustfile.LoadRun
    expected: int
    clocks: dict[str, dict[str, float]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    cut: dict[str, int] = field(default_factory=dict)  # per worker: requests cut by Locust stopping a user
    lost: list[dict[str, Any]] = field(default_factory=list)
    finals: set[str] = field(default_factory=set)

    def attach(self, runner: MasterRunner) -> None:
        self.runner = runner
        runner.register_message(_HELLO, self._on_hello)
        runner.register_message(_PING, self._on_ping)
        runner.register_message(_CLOCK, self._on_clock)
        runner.register_message(_ROWS, self._on_rows)
        runner.register_message(_LEFT, self._on_left)

    def _on_hello(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        self.runner.send_message(_CONFIG, self.run.config.to_message(), msg.node_id)

    def _on_ping(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        self.runner.send_message(_PONG, {"sent_ns": msg.data["sent_ns"], "master_ns": time.monotonic_ns()}, msg.node_id)

    def _on_left(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        """A worker that cannot take part (its host lacks the API key's variable) left: the run cannot be the one
        planned, so it ends here, with the worker's reason as the line the parent reports (runner.py)."""
        logging.getLogger(__name__).error("%s %s", WORKER_LEFT_LINE, msg.data["reason"])
        environment.process_exit_code = WORKER_LEFT_EXIT
        gevent.spawn(self.runner.quit)

    def _on_clock(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        self.clocks[msg.node_id] = msg.data

    def _on_rows(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        rows = msg.data["rows"]
        count = len(rows["ok"])  # a worker knows only its own users: the rows get the master's total
        self.run.recorder.extend(rows | {"users": array("i", [self.runner.user_count]).tobytes() * count})
        self.cpu[msg.node_id] = msg.data["cpu_percent"]
        self.requests[msg.node_id] = self.requests.get(msg.node_id, 0) + len(rows["ok"])
        self.cut[msg.node_id] = msg.data.get("cut", 0)
        if msg.data.get("final"):
            self.finals.add(msg.node_id)

    def collect_final(self) -> None:
        """At test stop (Locust's headless quit stops the master before its workers): ask every worker still present
        for its last rows and wait for them (at most FINAL_WAIT_S)."""
        lost = {entry["worker"] for entry in self.lost}
        waiting = [worker for worker in self.clocks if worker not in lost and worker in self.runner.clients]
        for worker in waiting:
            self.runner.send_message(_FINAL, None, worker)
        deadline = time.monotonic() + FINAL_WAIT_S
        while not self.finals.issuperset(waiting) and time.monotonic() < deadline:
            gevent.sleep(0.02)
        for worker in sorted(set(waiting) - self.finals):
            self._lose(worker, self.run.elapsed_s(), f"sent no final rows within {FINAL_WAIT_S:g} s of the end")

    def wait_for_clocks(self) -> None:
        """Until every expected worker reported its clock offset (at most CLOCK_WAIT_S)."""
        deadline = time.monotonic() + CLOCK_WAIT_S
        while len(self.clocks) < self.expected and time.monotonic() < deadline:
            gevent.sleep(0.05)

    def start(self, t0_ns: int) -> None:
        """Give every worker the start time, its index and the count."""
        workers = sorted(self.clocks)
        for index, worker in enumerate(workers):
            self.clocks[worker]["index"] = index
            self.runner.send_message(_START, {"t0_ns": t0_ns, "index": index, "count": len(workers)}, worker)

    def cpu_figures(self) -> tuple[float, float]:
        """All workers' CPU % together and the busiest worker's, from their latest reports."""
        values = list(self.cpu.values()) or [0.0]
        return sum(values), max(values)

    def check_workers(self, t_s: float) -> None:
        """Record workers that went missing or disconnected since the last check (once each)."""
        present = {client.id: client.state for client in self.runner.clients.values()}
        seen = {entry["worker"] for entry in self.lost}
        for worker in self.clocks:
            if worker in seen:
                continue
            if worker not in present:
                self._lose(worker, t_s, "disconnected from the master during the run")
            elif present[worker] == STATE_MISSING:
                self._lose(worker, t_s, "missing: no heartbeat for 3 s (process killed, hung or unreachable)")

    def _lose(self, worker: str, t_s: float, reason: str) -> None:
        index = self.clocks[worker].get("index")
        self.lost.append({"t_s": round(t_s, 3), "worker": worker, "index": index, "reason": reason})

    def generators(self) -> tuple[dict[str, Any], ...]:
        return tuple(
            {
                "worker": worker,
                "index": clock.get("index"),
                "clock_offset_us": clock["offset_ns"] / 1000,
                "clock_rtt_us": clock["rtt_ns"] / 1000,
                "requests": self.requests.get(worker, 0),
                "cut": self.cut.get(worker, 0),
            }
            for worker, clock in sorted(self.clocks.items())
        )


@dataclass
class WorkerLink:
    """A worker's side: the settings and clock handshakes, the start message, and the rows sent to the master."""

    build: Callable[[ChildConfig, str], Any]  # (settings, bodies' JSON text) -> locustfile.LoadRun
    run: Any = None  # the LoadRun, once the master's settings arrived
    pongs: list[tuple[int, int, int]] = field(default_factory=list)  # (sent, received, master) ns
    offset_ns: int = 0
    sent_rows: int = 0
    closed: bool = False  # the final rows went to the master

    def attach(self, runner: WorkerRunner) -> None:
        self.runner = runner
        runner.register_message(_CONFIG, self._on_config)
        runner.register_message(_PONG, self._on_pong)
        runner.register_message(_START, self._on_start)
        runner.register_message(_FINAL, self._on_final, concurrent=True)
        gevent.spawn(self._handshake)

    def _handshake(self) -> None:
        gevent.sleep(0.1)  # let the worker's connection settle
        self.runner.send_message(_HELLO, None)
        deadline = time.monotonic() + CONFIG_WAIT_S
        while self.run is None and time.monotonic() < deadline:
            gevent.sleep(0.02)
        if self.run is None:
            logging.getLogger(__name__).error("the master sent no run settings within %g s", CONFIG_WAIT_S)
            return
        for _ in range(CLOCK_PINGS):
            self.runner.send_message(_PING, {"sent_ns": time.monotonic_ns()})
            gevent.sleep(0.05)
        deadline = time.monotonic() + CLOCK_WAIT_S
        while len(self.pongs) < CLOCK_PINGS and time.monotonic() < deadline:
            gevent.sleep(0.05)
        sent, received, master = min(self.pongs, key=lambda p: p[1] - p[0])
        self.offset_ns = (sent + received) // 2 - master
        self.runner.send_message(_CLOCK, {"offset_ns": self.offset_ns, "rtt_ns": received - sent})

    def _on_final(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        """Stop starting requests, let those in flight complete (at most FINAL_WAIT_S / 2), send the last rows: the
        master's log then holds every request this worker sent."""
        self.run.draining = True
        deadline = time.monotonic() + FINAL_WAIT_S / 2
        while self.run.in_flight and time.monotonic() < deadline:
            gevent.sleep(0.005)
        self.flush(final=True)

    def _on_config(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        if self.run is not None:
            return
        try:
            self.run = self.build(ChildConfig.from_message(msg.data), msg.data["bodies"])
        except InputError as error:  # this host lacks what the run needs (the API key's variable): leave the run
            logging.getLogger(__name__).error("this worker leaves the run: %s; %s", error.message, error.hint)
            gevent.spawn(self._leave, error.message)
            return
        self.run.worker = self

    def _leave(self, reason: str) -> None:
        """Tell the master why this worker leaves (recorded with the run) and that it quits (Locust's own message),
        then stop this process."""
        self.runner.send_message(_LEFT, {"reason": reason})
        self.runner.send_message("quit", None)
        self.runner.environment.process_exit_code = WORKER_LEFT_EXIT  # `recommender worker` stops serving runs
        self.runner.quit()

    def _on_pong(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        self.pongs.append((msg.data["sent_ns"], time.monotonic_ns(), msg.data["master_ns"]))

    def _on_start(self, environment: Any, msg: Any, **_kwargs: Any) -> None:
        data = msg.data
        self.run.begin(data["t0_ns"] + self.offset_ns, data["index"], data["count"])
        self.run.greenlets.append(gevent.spawn(self._flush_every_second))

    def _flush_every_second(self) -> None:
        while True:
            gevent.sleep(FLUSH_S)
            self.flush()

    def flush(self, final: bool = False) -> None:
        """Send the rows recorded since the last flush, with this process's CPU % since then; `final`: the last."""
        if self.closed:
            return
        self.closed = final
        recorder = self.run.recorder
        rows = recorder.rows_since(self.sent_rows)
        self.sent_rows = len(recorder)
        cpu = self.run.process.cpu_percent(None)
        self.runner.send_message(_ROWS, {"rows": rows, "cpu_percent": cpu, "final": final, "cut": self.run.cut})
