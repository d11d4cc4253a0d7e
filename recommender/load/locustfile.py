"""The Locust side of the load driver. Loaded ONLY by the child `python -m locust -f <this file>`.

Never import this module from the main process: importing locust monkey-patches the standard
library with gevent. Settings arrive as environment variables (see config.ChildConfig).

- `RawInferenceUser` (the default) and `InferenceUser`: closed loop (no wait), POST pre-serialised KServe v2 JSON
  to /v2/models/<model>/infer and record every request exactly (time.monotonic_ns, microseconds), not from Locust's
  stats. The raw one holds a bare geventhttpclient connection; InferenceUser is Locust's FastHttpUser (request
  events, response wrapper), about half as efficient per core (benchmarks/generator.py measures both).
  A generative wire (OpenAI chat or completions): the raw user reads the answer one server-sent event at a time as it
  arrives and takes only the clock per chunk (load/token_stream.py), recording TTFT, every content chunk's time, the
  token counts and a clean finish with the request.
  Open loop (`rate` traffic): the users are a pool of senders that take the next scheduled send time,
  sleep until it, send, and record latency from the SCHEDULED time and how late the send went out.
- `PhaseShape`: the user count follows the clock through the compiled plan on every tick; it ends the
  test early once a stop condition (metrics.stopping) holds at the end of a steady-state window.
- A sampler greenlet records users and this process's CPU % once per second and writes the
  progress file; the result `.npz` is written at test stop.
- Locust's distributed mode (`--master` / `--worker`, see distributed.py): the master runs the shape, the sampler,
  the stop judge and writes the result; workers get their settings from the master, run the users and send their rows
  to the master every second.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import json
import logging
import os
import time
from collections.abc import Iterator
from http.client import HTTPException

import gevent
import numpy as np
import psutil
from geventhttpclient import HTTPClient
from locust import FastHttpUser, LoadTestShape, User, constant, events, task
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from recommender.load.config import ChildConfig
from recommender.load.distributed import FLUSH_S, MasterLink, WorkerLink
from recommender.load.recorder import RequestRecorder
from recommender.load.result import LoadProgress
from recommender.load.run_slot import keep_run, run_of
from recommender.load.token_stream import NO_ANSWER, Generation, TokenStream, answered
from recommender.metrics.steady import Window, window_spans
from recommender.metrics.stop_reason import StopReason
from recommender.metrics.stopping import ended_early, planned_window_counts, stop_reason
from recommender.metrics.summary import window_stats
from recommender.targets import kserve, wire
from recommender.targets.kserve_binary import binary_request
from recommender.targets.wire import CONTENT_KEYS, GENERATIVE, rows_asked

_SPAWN_RATE = 10_000  # users per second handed to Locust: large, so the count follows the clock, not a ramp
_SAMPLE_OFFSET_S = 0.5  # sample mid-second, away from the shape's whole-second ticks
_WINDOW_GRACE_S = 0.05  # judge a window this long after it ends (requests completed inside it are recorded by then)
_EARLY_WAKE_NS = 2_000_000  # open loop: wake this early and yield until the scheduled time
_IDLE_S = 0.05  # an open-loop sender with no send left waits this long before asking again
_TIMEOUT_S = 60.0  # connect and read timeouts of RawInferenceUser (FastHttpUser's defaults)
_REASONS_LOGGED = 20  # distinct reasons for failed answers logged per run (each once); the rest are only counted
_EVENT_END = b"\n\n"  # a server-sent event ends with a blank line (OpenAI and vLLM write \n line ends)


# one request as sent: its bytes, the rows it asks for, and the headers of its own (binary tensors: the JSON header's
# length and the content type; JSON: none beyond the run's)
Request = tuple[bytes, int, dict[str, str]]


class Bodies:
    """The request bodies (JSON text: one body, a list of them, or {"encoding": "binary", "bodies": [...]}: KServe's
    binary tensor extension, kserve_binary.py), serialised once, each with the rows it asks for (what its answer must
    hold to count as good) and its own headers: sent in turn (`next`), or by payload index (a trace's `at`)."""

    def __init__(self, text: str, source: str) -> None:
        payload = json.loads(text)
        binary = isinstance(payload, dict) and payload.get("encoding") == "binary"
        bodies = payload["bodies"] if binary else payload if isinstance(payload, list) else [payload]
        if not bodies:
            raise ValueError(f"{source} holds an empty list of request bodies")
        self.serialised = [_request(body, binary) for body in bodies]
        self.turn: Iterator[Request] = itertools.cycle(self.serialised)

    def next(self, index: int | None = None) -> Request:
        """The body of payload index `index`, its rows and its headers; None: the next in turn."""
        return next(self.turn) if index is None else self.serialised[index]


def _request(body: dict, binary: bool) -> Request:
    if not binary:
        return json.dumps(body).encode(), rows_asked(body), {}
    data, headers = binary_request(body)
    return data, rows_asked(body), headers


def answer_problem(status: int, content: bytes, answer_key: str, rows: int) -> str | None:
    """None for a good answer (HTTP 200 with the `rows` its request asked for, wire.answer_problem: parsed, not a
    byte search, so that `{"data": []}` is no answer), else its one-line reason."""
    if status != 200:
        return f"HTTP {status}: {' '.join(content[:200].decode('utf-8', 'replace').split())}"
    return wire.answer_problem(answer_key, content, rows)


class LoadRun:
    """State of one run in the child: clock, bodies, recorder, sampler. Attached to the Locust environment."""

    def __init__(self, config: ChildConfig, bodies: Bodies, environment: Environment) -> None:
        self.config = config
        self.environment = environment
        self.bodies = bodies
        self.path = config.path or kserve.infer_path(config.model_name)
        self.generative = config.wire in GENERATIVE  # answers read per chunk, with the generation columns
        self.content_key = CONTENT_KEYS.get(config.wire, "")
        self.reasons: collections.Counter[str] = collections.Counter()  # why answers failed, each logged once
        self.headers = config.request_headers()  # the API key from this process's own environment, if any
        self.plan = config.plan
        self.total_s = config.plan.duration
        self.recorder = RequestRecorder()
        self.process = psutil.Process()
        self.t0_ns: int | None = None
        self.started_at = 0.0
        self.greenlets: list[gevent.Greenlet] = []
        self.finished = False
        self.stop_reason: StopReason | None = None
        self.sends = config.plan.sends()  # open loop: read before the clock starts (a trace's file takes a moment)
        self.schedule_ns: list[int] = []
        self.send_indices: list[int] | None = None  # a trace's payload index per send (None: bodies in turn)
        self.next_send = 0
        self.send_step = 1  # distributed open loop: this worker takes every `send_step`-th scheduled send
        self.pool_ready = False
        self.in_flight = 0  # requests sent and not yet answered
        self.cut = 0  # requests sent whose user Locust stopped before the answer (a rebalance, a forced stop)
        self.draining = False  # a distributed worker past its final rows: start no more requests
        self.master: MasterLink | None = None
        self.worker: WorkerLink | None = None

    def attach(self, runner: object, expected_workers: int) -> None:
        """Lead Locust's distributed mode when this process is its master (a worker's run is built by its
        WorkerLink)."""
        if isinstance(runner, MasterRunner):
            self.master = MasterLink(self, expected_workers)
            self.master.attach(runner)

    def begin(self, t0_ns: int, index: int, count: int) -> None:
        """A worker: the master's start time on this clock; open loop: this worker's share of the schedule."""
        self.t0_ns, self.started_at = t0_ns, time.time() - (time.monotonic_ns() - t0_ns) / 1e9
        self._schedule()
        self.next_send, self.send_step = index, count
        self.process.cpu_percent(None)

    def start(self) -> None:
        """Start the clock (t_s = 0), the CPU measurement, the sampler and the stop judge; called on the shape's
        first tick."""
        if self.master is not None:
            self.master.wait_for_clocks()
        self.t0_ns, self.started_at = time.monotonic_ns(), time.time()
        self._schedule()
        self.process.cpu_percent(None)  # prime: the next call measures from here
        if self.master is not None:
            self.master.start(self.t0_ns)
        self.greenlets.append(gevent.spawn(self._sample_every_second))
        if self.config.rules is not None:
            self.greenlets.append(gevent.spawn(self._judge_windows))

    def _schedule(self) -> None:
        """Open loop: the send times on this clock (monotonic ns) and, for a trace, each send's payload index."""
        times, indices = self.sends
        self.schedule_ns = (self._t0() + (times * 1e9).astype(np.int64)).tolist()
        self.send_indices = None if indices is None else indices.tolist()

    def take_send(self) -> tuple[int, int | None] | None:
        """Open loop: the next scheduled send time (monotonic ns) and its payload index (None: the next body in
        turn), or None when the schedule is used up."""
        if self.next_send >= len(self.schedule_ns):
            return None
        k = self.next_send
        self.next_send += self.send_step
        return self.schedule_ns[k], None if self.send_indices is None else self.send_indices[k]

    def record_scheduled(
        self, scheduled_ns: int, sent_ns: int, done_ns: int, ok: bool, users: int, generation: Generation | None
    ) -> None:
        """Open loop: latency (and a generation's token times) from the scheduled send, lateness of the real send."""
        self.recorder.record(
            (scheduled_ns - self._t0()) / 1e9,
            (done_ns - scheduled_ns) // 1000,
            ok,
            users,
            (sent_ns - scheduled_ns) // 1000,
            generation,
        )

    def _judge_windows(self) -> None:
        """At the end of every steady-state window, measure it and check the stop conditions."""
        rules = self.config.rules
        assert rules is not None  # judged only when the run has stop rules (start)
        spans = window_spans(self.plan.windows(), rules.windows.warmup_s, rules.windows.window_s)
        planned, loads = planned_window_counts(spans), [level.load for level in self.plan.levels]
        windows: list[Window] = []
        grace = _WINDOW_GRACE_S + (FLUSH_S + 0.2 if self.master is not None else 0.0)  # workers send rows once a second
        for phase, start, end in spans:
            gevent.sleep(max(0.0, end + grace - self.elapsed_s()))
            index = sum(w.phase_index == phase for w in windows)
            windows.append(Window(phase, index, window_stats(self.recorder.log(), start, end), loads[phase]))
            self.stop_reason = stop_reason(windows, planned, rules)
            if self.stop_reason:
                logging.getLogger(__name__).warning("stopping early: %s", self.stop_reason)
                return

    def elapsed_s(self) -> float:
        return (time.monotonic_ns() - self._t0()) / 1e9

    def _t0(self) -> int:
        assert self.t0_ns is not None, "the run's clock has not started"
        return self.t0_ns

    def judge(self, status: int, content: bytes, rows: int) -> tuple[bool, str | None]:
        """Whether an answer counts as good; a malformed one's reason goes to the log the first time it is seen
        (locust.stderr.log), with how many answers failed so far."""
        reason = answer_problem(status, content, self.config.answer_key, rows)
        self.note(reason)
        return reason is None, reason

    def note(self, reason: str | None) -> None:
        """A failed answer's reason, logged the first time it is seen."""
        if reason is not None:
            key = reason[:60]  # the same fault with other figures in it is one reason
            self.reasons[key] += 1
            if self.reasons[key] == 1 and len(self.reasons) <= _REASONS_LOGGED:
                logging.getLogger(__name__).warning("a failed answer: %s", reason)

    def record(self, sent_ns: int, done_ns: int, ok: bool, users: int, generation: Generation | None = None) -> None:
        self.recorder.record((sent_ns - self._t0()) / 1e9, (done_ns - sent_ns) // 1000, ok, users, None, generation)

    def _sample_every_second(self) -> None:
        for second in itertools.count():
            gevent.sleep(max(0.0, second + _SAMPLE_OFFSET_S - self.elapsed_s()))
            t_s = self.elapsed_s()
            runner = self.environment.runner
            assert runner is not None  # the run is attached once Locust has its runner
            users = runner.user_count
            cpu = self.process.cpu_percent(None)
            if self.master is not None:
                self.master.check_workers(t_s)
                cpu, busiest = self.master.cpu_figures()
                self.recorder.busiest.append(busiest)
            self.recorder.sample(t_s, users, self.plan.users_at(t_s) or 0, cpu)
            self._write_progress(t_s, users)

    def _write_progress(self, t_s: float, users: int) -> None:
        recorder = self.recorder
        LoadProgress(t_s, self.total_s, users, len(recorder), recorder.failures).write(self.config.progress_path)

    def finish(self) -> None:
        """Write the result file once, at test stop (idempotent: test_stop and quitting both call it)."""
        if self.finished:
            return
        self.finished = True
        gevent.killall(self.greenlets, block=True)
        if self.worker is not None:
            return  # a worker's rows went to the master (distributed.WorkerLink.flush)
        if self.master is not None:
            self.master.collect_final()
        duration = self.elapsed_s() if self.t0_ns is not None else 0.0
        self._write_progress(duration, self.environment.runner.user_count if self.environment.runner else 0)
        stopped = ended_early(self.stop_reason, duration, self.total_s)
        result = self.recorder.result(self.started_at, duration, stopped.text if stopped else None)
        if self.master is not None:
            result = dataclasses.replace(
                result, generators=self.master.generators(), lost_workers=tuple(self.master.lost)
            )
        result.to_npz(self.config.result_path)


def _not_spawn_rate_warning(record: logging.LogRecord) -> bool:
    """Locust warns on every tick above 100 users/s; our high rate is deliberate (the count follows the clock)."""
    return "spawn rate is very high" not in record.getMessage()


@events.init.add_listener
def _attach_run(environment: Environment, **_kwargs: object) -> None:
    """The master or the only process: settings from the environment. A worker: settings from the master."""
    logging.getLogger("locust.runners").addFilter(_not_spawn_rate_warning)
    if isinstance(environment.runner, WorkerRunner):
        WorkerLink(lambda config, bodies: _worker_run(environment, config, bodies)).attach(environment.runner)
        return
    config = ChildConfig.from_env(os.environ)
    bodies = Bodies(config.payload_path.read_text(encoding="utf-8"), str(config.payload_path))
    run = LoadRun(config, bodies, environment)
    keep_run(environment, run)
    options = environment.parsed_options
    run.attach(environment.runner, getattr(options, "expect_workers", 1) or 1)


def _worker_run(environment: Environment, config: ChildConfig, bodies: str) -> LoadRun:
    run = LoadRun(config, Bodies(bodies, "the master's request bodies"), environment)
    keep_run(environment, run)
    return run


def _load_run(environment: Environment) -> LoadRun:
    run = run_of(environment)
    assert isinstance(run, LoadRun), "no run attached to this Locust environment"
    return run


@events.test_stop.add_listener
@events.quitting.add_listener
def _finish_run(environment: Environment, **_kwargs: object) -> None:
    run = run_of(environment)
    if run is not None:  # a worker the master never sent settings has no run
        run.finish()


class _Inference(User):
    """One closed-loop client: send, wait for the answer, send again (open loop: at the scheduled times). The HTTP
    client is the subclass's (`_send`)."""

    abstract = True
    wait_time = constant(0)

    def on_start(self) -> None:
        self.load_run = _load_run(self.environment)

    @task
    def infer(self) -> None:
        if self.load_run.draining:
            gevent.sleep(_IDLE_S)
            return
        if self.load_run.plan.open_loop:
            self._send_scheduled()
            return
        self._closed_loop()

    def _closed_loop(self) -> None:
        """Send, wait for the answer, send again, without handing back to Locust's task scheduler in between: its
        per-task bookkeeping and the yield to gevent's hub after every task put ~100 us between an answer and the next
        send (docs/benchmarks.md "Under dynamic batching"), where a real client re-sends at once. Locust stops a user
        by killing its greenlet (no stop_timeout is set), which ends this loop wherever it is."""
        run, runner = self.load_run, self.environment.runner
        while not run.draining:
            users = runner.user_count
            sent_ns = time.monotonic_ns()
            ok, done_ns, generation = self._post(run.bodies.next(), sent_ns)
            run.record(sent_ns, done_ns, ok, users, generation)

    def _send_scheduled(self) -> None:
        run = self.load_run
        send = run.take_send()
        if send is None:
            gevent.sleep(_IDLE_S)
            return
        scheduled_ns, index = send
        request = run.bodies.next(index)
        _sleep_until(scheduled_ns)
        users = self.environment.runner.user_count
        sent_ns = time.monotonic_ns()
        ok, done_ns, generation = self._post(request, scheduled_ns)
        run.record_scheduled(scheduled_ns, sent_ns, done_ns, ok, users, generation)

    def _post(self, request: Request, origin_ns: int) -> Sent:
        """Send one request; `origin_ns`: what a generation's token times count from (the send, or its schedule)."""
        run = self.load_run
        run.in_flight += 1
        try:
            return self._send(run, request, origin_ns)
        except gevent.GreenletExit:
            run.cut += 1  # sent, maybe answered by the server, never logged: counted so the totals reconcile
            raise
        finally:
            run.in_flight -= 1

    def _send(self, run: LoadRun, request: Request, origin_ns: int) -> Sent:
        raise NotImplementedError


class InferenceUser(_Inference, FastHttpUser):
    """Locust's FastHttpUser (geventhttpclient underneath), its request events and response wrapper included."""

    def _send(self, run: LoadRun, request: Request, origin_ns: int) -> Sent:
        body, rows, own = request  # a generative wire is refused for this user before the run (runner.py STREAM_READER)
        # locust annotates `data` as str | dict, but FastHttpSession sends bytes as they are (geventhttpclient)
        with self.client.post(
            run.path,
            data=body,  # type: ignore[arg-type]
            headers={**run.headers, **own} if own else run.headers,
            catch_response=True,
        ) as response:
            done_ns = time.monotonic_ns()
            ok, reason = run.judge(response.status_code, response.content or b"", rows)
            if not ok:
                response.failure(reason)
        return ok, done_ns, None


class RawInferenceUser(_Inference):
    """The same requests on a bare geventhttpclient connection per user: no Locust request event, no response
    wrapper, no failure bookkeeping beyond the recorder's ok flag (benchmarks/generator.py measures both)."""

    def on_start(self) -> None:
        super().on_start()
        self.http = HTTPClient.from_url(
            self.host, concurrency=1, connection_timeout=_TIMEOUT_S, network_timeout=_TIMEOUT_S
        )

    def on_stop(self) -> None:
        self.http.close()

    def _send(self, run: LoadRun, request: Request, origin_ns: int) -> Sent:
        body, rows, own = request
        if run.generative:
            return self._generate(run, body, origin_ns)
        try:
            response = self.http.post(run.path, body=body, headers={**run.headers, **own} if own else run.headers)
            content = response.read()
        except (OSError, gevent.Timeout, HTTPException):  # refused, reset, timed out, malformed answer: a failure
            return False, time.monotonic_ns(), None
        done_ns = time.monotonic_ns()
        return run.judge(response.status_code, content, rows)[0], done_ns, None

    def _generate(self, run: LoadRun, body: bytes, origin_ns: int) -> Sent:
        """A generation: the answer read one event at a time as it arrives, only the clock taken per event (the
        byte checks are TokenStream's); a non-streamed one read whole."""
        try:
            response = self.http.post(run.path, body=body, headers=run.headers)
            if response.status_code != 200 or not run.config.stream:
                content = response.read()
                done_ns = time.monotonic_ns()
                if response.status_code != 200:
                    run.note(answer_problem(response.status_code, content, "", 1))
                    return False, done_ns, NO_ANSWER
                ok, reason, generation = answered(content, run.config.wire, (done_ns - origin_ns) // 1000)
            else:
                stream = TokenStream(run.content_key, origin_ns)
                readline = response.readline
                while event := readline(_EVENT_END):
                    stream.feed(event, time.monotonic_ns())
                done_ns = time.monotonic_ns()
                ok, reason, generation = stream.outcome()
        except (OSError, gevent.Timeout, HTTPException) as error:  # refused, reset, timed out: a failure
            run.note(f"the request failed: {type(error).__name__}")
            return False, time.monotonic_ns(), NO_ANSWER
        run.note(reason)
        return ok, done_ns, generation


Sent = tuple[bool, int, Generation | None]  # a request's outcome: good, when it ended (ns), a generation's record


def _sleep_until(deadline_ns: int) -> None:
    """Sleep to just before the deadline, then yield in a loop to it: gevent's timer alone wakes ~1 ms late."""
    gevent.sleep(max(0, deadline_ns - _EARLY_WAKE_NS - time.monotonic_ns()) / 1e9)
    while time.monotonic_ns() < deadline_ns:
        gevent.sleep(0)


class PhaseShape(LoadTestShape):
    """The compiled plan: the target user count is recomputed from the clock on every tick; None ends the test."""

    def tick(self) -> tuple[int, float] | None:
        assert self.runner is not None  # Locust ticks a shape only once it has its runner
        run = _load_run(self.runner.environment)
        if run.t0_ns is None and run.master is not None:
            run.master.wait_for_clocks()  # every worker has its settings before any user is spawned on it
        if run.t0_ns is None and run.plan.open_loop and not run.pool_ready:
            run.pool_ready = True  # open loop: spawn the sender pool one tick before the schedule's clock starts
            return run.plan.levels[0].initial_users, _SPAWN_RATE
        if run.t0_ns is None:
            run.start()
        users = run.plan.users_at(run.elapsed_s())
        return None if users is None or run.stop_reason else (users, _SPAWN_RATE)
