"""Drive load at an endpoint with Locust in child processes and return what it measured.

The main process never imports locust or gevent (gevent monkey-patches the standard library,
which SQLAlchemy and boto3 in this process must not see). `run_load` writes the payload, starts
`python -m locust --headless` in its own process group with settings in environment variables
(config.ChildConfig), relays the child's progress file, enforces a hard timeout, and on any
exception or interruption kills the whole process group before re-raising; the child dies with this
process even when it is killed with -9 (lifeline.py). `workers` > 1 or remote workers: Locust's distributed mode (one
master bound to `master.bind`, 127.0.0.1 by default, N workers on this host, and `master.remote_workers` joining from
other hosts with `recommender worker`, which calls `run_worker`; generators.py). The run waits for all of them (at
most `master.wait_s`) and fails with a message naming them when they do not all join. The master's result file holds
every worker's requests on its clock (distributed.py), and workers lost mid-run are recorded in the result.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from recommender.errors import LoadError
from recommender.load.config import WORKER_LEFT_LINE, ChildConfig
from recommender.load.generators import (
    GeneratorProcesses,
    MasterSettings,
    kill_group,
    master_arguments,
    worker_arguments,
)
from recommender.load.result import PLAN_FILE, SENT_TO_FILE, LoadProgress, LoadResult
from recommender.load.shapes import PhaseLike, PlanLevel, TrafficPlan
from recommender.metrics.records import RequestLog, Timeline
from recommender.metrics.rules import Rules
from recommender.redaction import redact
from recommender.targets import kserve
from recommender.targets.lifeline import die_with_parent
from recommender.targets.wire import GENERATIVE

__all__ = ["LoadProgress", "LoadRequest", "LoadResult", "RequestLog", "Timeline", "run_load"]

_LOCUSTFILE = Path(__file__).with_name("locustfile.py")
# endpoint URL scheme -> (extra locustfile with the user class, user class); http(s) use locustfile's users
_USERS = {"sagemaker": (Path(__file__).with_name("sagemaker_user.py"), "SageMakerUser")}
# http(s) clients in locustfile.py, the default first: benchmarks/generator.py measures both side by side; the raw
# geventhttpclient user was the faster (2.3x requests per core, 0.15 vs 0.38 ms added at c=1; docs/benchmarks.md)
HTTP_CLIENTS = {"geventhttpclient": "RawInferenceUser", "fasthttp": "InferenceUser"}
STREAM_READER = "RawInferenceUser"  # the user class that reads a generative answer chunk by chunk
DEFAULT_CLIENT = "geventhttpclient"  # what every job measures with (part of the reuse key, job/protocol.py)
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]
_POLL_S = 0.2
_STDERR_TAIL_LINES = 20
_GAVE_UP = "Gave up waiting for workers to connect"  # Locust master's log line when --expect-workers-max-wait passes


@dataclass(frozen=True)
class LoadRequest:
    """One load test: where to send, what to send, how many users over time, where to keep the files."""

    endpoint: str  # base URL, e.g. http://127.0.0.1:8000
    model_name: str
    bodies: Sequence[Mapping[str, object]]  # request bodies (KServe v2, or OpenAI embeddings), sent in turn
    phases: Sequence[PhaseLike] | TrafficPlan  # SageMaker phases, or any shape compiled by shapes.compile_traffic
    out_dir: Path
    api_key_env: str = ""  # the variable holding the endpoint's API key: each load process reads it from its own env
    timeout_slack_s: float = 30.0  # allowed on top of the phases for start-up and shutdown
    rules: Rules | None = None  # steady-state windows and stop conditions judged by the child; None: no early stop
    workers: int = 1  # 1: one Locust process; N > 1: Locust's distributed mode, one master and N workers on this host
    generator_cpus: tuple[int, ...] | None = None  # pin every generator process to these CPUs (None: no pinning)
    # distributed mode: the master's bind, port, remote workers, wait
    master: MasterSettings = field(default_factory=MasterSettings)
    client: str = DEFAULT_CLIENT  # http(s) endpoints: a key of HTTP_CLIENTS
    path: str = ""  # where requests are POSTed ("": the KServe v2 infer path of `model_name`)
    answer_key: str = "outputs"  # the JSON key every good answer holds (the OpenAI embeddings API's: data)
    wire: str = "kserve"  # the wire's name (targets/wire.py): a generative one's answers are read per chunk
    stream: bool = True  # a generative wire: answers stream as server-sent events (False: one JSON answer)
    encoding: str = "json"  # KServe bodies as JSON, or "binary": the binary tensor extension (targets/kserve_binary.py)

    @property
    def distributed(self) -> bool:
        return self.workers > 1 or self.master.remote_workers > 0

    @property
    def plan(self) -> TrafficPlan:
        if isinstance(self.phases, TrafficPlan):
            return self.phases
        return TrafficPlan(tuple(PlanLevel(p.initial_users, p.spawn_rate, p.duration_seconds) for p in self.phases))

    @property
    def timeout_s(self) -> float:
        return self.plan.duration + self.timeout_slack_s + (self.master.wait_s if self.distributed else 0.0)


def run_load(request: LoadRequest, progress: Callable[[LoadProgress], None] | None = None) -> LoadResult:
    """Run the phases against the endpoint; raise LoadError when the generator fails or overruns."""
    request = dataclasses.replace(request, out_dir=Path(request.out_dir).resolve())  # the child runs in out_dir
    config = _prepare(request)
    commands, address = _commands(request)
    processes = GeneratorProcesses.launch(commands, _child_env(config), request.out_dir, request.generator_cpus)
    try:
        _wait(processes, config, request.timeout_s, progress)
        processes.finish()
    except BaseException:
        processes.kill()
        raise
    _check_no_worker_left(processes.master.returncode, request.out_dir)
    _check_workers_joined(processes.master.returncode, request, address)
    result = _collect(processes.master.returncode, config, request.out_dir)
    return _with_losses(result, processes.lost)


def _commands(request: LoadRequest) -> tuple[list[list[str]], str]:
    """One Locust command, or the master's followed by each local worker's; and the master's address ("" for one)."""
    base = _locust_command(request.endpoint, request.client)
    if not request.distributed:
        return [base], ""
    settings, port = request.master, request.master.choose_port()
    master = [*base, *master_arguments(settings, port, request.workers + settings.remote_workers)]
    worker = [*base, *worker_arguments(settings.local_host, port)]
    return [master, *(worker for _ in range(request.workers))], f"{settings.bind}:{port}"


def _check_workers_joined(returncode: int, request: LoadRequest, address: str) -> None:
    """Locust's master gives up (exit 1) when the expected workers did not all join in time: say who was expected."""
    if returncode == 0 or not address or _GAVE_UP not in _stderr_tail(request.out_dir):
        return
    remote = request.master.remote_workers
    raise LoadError(
        f"not all {request.workers + remote} expected load workers ({request.workers} on this host, {remote} remote) "
        f"joined the Locust master at {address} within {request.master.wait_s:g} s (traffic.worker_wait_seconds)",
        hint=(
            f"on each remote host run `recommender worker --master HOST:{address.rsplit(':', 1)[1]}` (HOST: an address "
            f"of this host it can reach; traffic.master_bind must not be 127.0.0.1 for remote hosts), or lower "
            f"traffic.remote_workers"
            if remote
            else f"see {request.out_dir / 'locust-worker-1.stderr.log'}"
        ),
    )


def _check_no_worker_left(returncode: int, out_dir: Path) -> None:
    """The master ended the run because a worker could not take part (distributed.py; exit WORKER_LEFT_EXIT, or 1
    when it was still waiting for workers to join): say the worker's reason."""
    lines = [line for line in _stderr_tail(out_dir).splitlines() if WORKER_LEFT_LINE in line] if returncode else []
    if not lines:
        return
    raise LoadError(
        lines[-1][lines[-1].index(WORKER_LEFT_LINE) :],
        hint="export the variable target.api_key_env names on every load worker's host before `recommender worker`",
    )


def run_worker(host: str, port: int) -> int:
    """One Locust worker joining the master at host:port for one run, as a remote host does (`recommender worker`):
    it loads every user class and takes its settings, target URL included, from the master. Output goes to this
    process's. Returns the worker's exit code; on any exception or interruption its process group is killed."""
    files = ",".join(str(path) for path in (_LOCUSTFILE, *(extra for extra, _ in _USERS.values())))
    command = [
        sys.executable,
        "-m",
        "locust",
        "-f",
        files,
        "--loglevel",
        "WARNING",
        "--exit-code-on-error",
        "0",
        *worker_arguments(host, port),
    ]
    env = {**os.environ, "PYTHONPATH": _python_path(), "PYTHONUNBUFFERED": "1"}
    worker = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, env=env, start_new_session=True, preexec_fn=die_with_parent()
    )
    try:
        return worker.wait()
    except BaseException:
        kill_group(worker)
        raise


def _with_losses(result: LoadResult, lost: list[dict]) -> LoadResult:
    """The master's record of lost workers, plus the exit status this process saw for each (on the load clock)."""
    seen = tuple(
        {
            "t_s": round(entry["at"] - result.started_at, 3),
            "worker": f"local worker {entry['index'] + 1}",
            "index": None,
            "reason": entry["reason"],
        }
        for entry in lost
    )
    return dataclasses.replace(result, lost_workers=result.lost_workers + seen) if seen else result


def _prepare(request: LoadRequest) -> ChildConfig:
    url = urlsplit(request.endpoint)
    if url.scheme not in ("http", "https", *_USERS) or not url.netloc:
        raise LoadError(
            f"endpoint {request.endpoint!r} is not an http(s) or sagemaker:// URL",
            hint="use a base URL like http://127.0.0.1:8000 or sagemaker://ENDPOINT_NAME",
        )
    if request.client not in HTTP_CLIENTS:
        raise LoadError(f"unknown HTTP client {request.client!r}", hint=f"use one of {', '.join(HTTP_CLIENTS)}")
    if request.wire in GENERATIVE and HTTP_CLIENTS.get(request.client) != STREAM_READER:
        raise LoadError(
            f"HTTP client {request.client!r} cannot time a streamed answer per chunk (protocol {request.wire})",
            hint=f"use the client {next(k for k, v in HTTP_CLIENTS.items() if v == STREAM_READER)!r}",
        )
    if not request.bodies:
        raise LoadError("no request bodies to send", hint="give the payload at least one KServe v2 request body")
    if not request.plan.levels:
        raise LoadError("no traffic phases", hint="give the traffic at least one phase")
    if request.encoding == "binary" and (url.scheme not in ("http", "https") or not _kserve(request.bodies)):
        raise LoadError(
            "traffic.request_encoding: binary sends KServe v2 binary tensors over HTTP, and this endpoint takes "
            + (
                "SageMaker invocations"
                if url.scheme not in ("http", "https")
                else "JSON text (a server that tokenizes)"
            ),
            hint="set traffic.request_encoding: json for this target",
        )
    request.out_dir.mkdir(parents=True, exist_ok=True)
    config = ChildConfig(
        model_name=request.model_name,
        payload_path=request.out_dir / "payload.json",
        plan=request.plan,
        result_path=request.out_dir / "load.npz",
        progress_path=request.out_dir / "progress.json",
        api_key_env=request.api_key_env,
        rules=request.rules,
        path=request.path,
        answer_key=request.answer_key,
        wire=request.wire,
        stream=request.stream,
    )
    bodies = list(request.bodies)  # the child's Bodies reads either form
    config.payload_path.write_text(
        json.dumps({"encoding": "binary", "bodies": bodies} if request.encoding == "binary" else bodies)
    )
    (request.out_dir / PLAN_FILE).write_text(request.plan.to_json())  # what `export --format aiperf` splits it by
    path = request.path or kserve.infer_path(request.model_name)  # as the child posts it (locustfile.py)
    sent_to = redact(request.endpoint.rstrip("/") + path)  # the URL `export --format aiperf` names
    (request.out_dir / SENT_TO_FILE).write_text(json.dumps({"url": sent_to}))
    for stale in (config.result_path, config.progress_path):
        stale.unlink(missing_ok=True)
    return config


def _kserve(bodies: Sequence[Mapping[str, object]]) -> bool:
    return all(isinstance(body.get("inputs"), list) for body in bodies)


def _locust_command(endpoint: str, client: str) -> list[str]:
    extra_file, user_class = _USERS.get(urlsplit(endpoint).scheme, (None, HTTP_CLIENTS[client]))
    files = ",".join(str(path) for path in (_LOCUSTFILE, extra_file) if path)
    return [
        sys.executable, "-m", "locust", "-f", files, "--headless", "--host", endpoint,
        "--only-summary", "--loglevel", "WARNING",
        "--exit-code-on-error", "0",  # failed requests are data (in the result file), not a generator failure
        *([user_class] if user_class else []),
    ]  # fmt: skip


def _child_env(config: ChildConfig) -> dict[str, str]:
    """This checkout first on the child's path, so it loads the same `recommender` as the parent."""
    return {**os.environ, **config.to_env(), "PYTHONPATH": _python_path(), "PYTHONUNBUFFERED": "1"}


def _python_path() -> str:
    return os.pathsep.join(filter(None, [str(_PACKAGE_ROOT), os.environ.get("PYTHONPATH")]))


def _wait(
    processes: GeneratorProcesses,
    config: ChildConfig,
    timeout_s: float,
    progress: Callable[[LoadProgress], None] | None,
) -> None:
    """Relay progress until the child (the master) exits (the last heartbeat included) or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    last: LoadProgress | None = None
    while True:
        exited = processes.poll()
        current = LoadProgress.read(config.progress_path)
        if progress is not None and current is not None and current != last:
            progress(current)
        last = current
        if exited:
            return
        if time.monotonic() > deadline:
            processes.kill()
            raise LoadError(
                f"the load generator did not finish within {timeout_s:.0f} s\n"
                f"{_stderr_tail(config.result_path.parent)}",
                hint="Locust started or stopped too slowly on this host: raise timeout_slack_s; "
                f"see {config.result_path.parent / 'locust.stderr.log'}",
            )
        time.sleep(_POLL_S)


def _collect(returncode: int, config: ChildConfig, out_dir: Path) -> LoadResult:
    if returncode != 0:
        raise LoadError(
            f"the load generator exited with code {returncode}\n{_stderr_tail(out_dir)}",
            hint=f"see {out_dir / 'locust.stderr.log'}; check the endpoint URL, the model name and the payload",
        )
    if not config.result_path.exists():
        raise LoadError(
            f"the load generator wrote no result file ({config.result_path})\n{_stderr_tail(out_dir)}",
            hint=f"see {out_dir / 'locust.stderr.log'}",
        )
    result = LoadResult.from_npz(config.result_path)
    if len(result.requests) == 0:
        raise LoadError(
            f"the load generator sent no requests\n{_stderr_tail(out_dir)}",
            hint=f"see {out_dir / 'locust.stderr.log'} for exceptions raised in the Locust user",
        )
    return result


def _stderr_tail(out_dir: Path) -> str:
    try:
        lines = (out_dir / "locust.stderr.log").read_text(errors="replace").splitlines()
    except FileNotFoundError:
        return "(no stderr)"
    return "\n".join(lines[-_STDERR_TAIL_LINES:]) or "(stderr empty)"
