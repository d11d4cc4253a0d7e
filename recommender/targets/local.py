"""The `local` target: the real tritonserver from the nvidia-pytriton wheel, as a child process on loopback.

Exposure: HTTP and metrics on 127.0.0.1 only, gRPC off, no model-repository API (`--model-control-mode=none`:
the model is loaded at start and nothing can load, unload or replace one). The admin APIs we never call
(model-repository, shared-memory, trace, logging) are *closed*: tritonserver's
`--http-restricted-api` makes them require a header whose expected value holds a line feed, which no HTTP request
can carry (a line feed ends a header line; tritonserver drops such a request without an answer). So the command
line holds no secret: there is none. Statistics and model config (read-only; our client reads statistics,
perf_analyzer reads the config) and inference stay open, as open as the loopback port. tritonserver has no other way to
receive a token than its command line (no file, no
environment variable: `tritonserver --help`, triton-inference-server/server#7183), hence no token at all.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psutil

from recommender.errors import TargetError
from recommender.hardware import Gpu, cuda_environment, detect_hardware, resolve_accelerator
from recommender.targets import triton_binary
from recommender.targets.base import built
from recommender.targets.deployment import Deployment
from recommender.targets.leftovers import PID_FILE, ServerRecord, remove_shared_memory, stop_leftovers
from recommender.targets.server_process import (
    LOOPBACK,
    descendants,
    free_loopback_ports,
    is_alive,
    log_tail,
    process_tree,
    start_in_session,
    stop_session,
)

CLOSED_APIS = "model-repository,shared-memory,trace,logging"  # the APIs that change the server; none is called
CLOSED_HEADER = "x-recommender-closed"
CLOSED_VALUE = "closed\nnever"  # a line feed: no HTTP header value can equal it, so the closed APIs answer nobody
SERVER_PROCESS_NAMES = frozenset({"tritonserver", triton_binary.STUB_NAME[:15], triton_binary.STUB_NAME})
LOG_TAIL_LINES = 40


@dataclass(frozen=True)
class LocalTarget:
    """Deploy a model repository on this host with tritonserver (no Docker, CPU instances)."""

    name: ClassVar[str] = "local"
    load_shares_host: ClassVar[bool] = True
    deploys: ClassVar[bool] = True
    native_backends: ClassVar[bool] = False  # the pip wheel's tritonserver has the Python backend only: the runner
    ready_timeout: float = 180.0  # seconds to wait for the server and the model to become ready
    stop_timeout: float = 20.0  # seconds between SIGTERM and SIGKILL on teardown
    # Triton's own wait on shutdown for in-flight requests, then for its models to unload. Teardown comes after the
    # load has stopped, so nothing is in flight; the unload is the Python backend stub's exit, ~3 s of a 4.8 s
    # teardown (measured: docs/design.md "Targets"). 0: the server exits at once, and _stop kills the stubs.
    exit_timeout_secs: int = 0
    accelerator: str = "auto"  # auto | cpu | gpu: gpu is refused at preflight on a host without one

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> LocalTarget:
        return cls(ready_timeout=target.ready_timeout_seconds, accelerator=target.accelerator)

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        resolve_accelerator(self.accelerator, detect_hardware())
        triton_binary.preflight()

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> LocalDeployment:
        """Start tritonserver for `model_name` in `repository`, given exactly `gpus` (by UUID, as CUDA devices
        0..n-1; none: CPU only); returns once the model is ready."""
        install = triton_binary.preflight()
        run_dir = Path(run_dir).resolve()
        stop_leftovers(run_dir, SERVER_PROCESS_NAMES)  # of a job killed with -9: their stub copy is busy, ports held
        backends = prepare_run_directory(install, run_dir)
        http, grpc, metrics = free_loopback_ports(3)
        deployment = LocalDeployment(
            model_name=model_name,
            repository=built(repository).resolve(),
            run_dir=run_dir,
            ports=(http, grpc, metrics),
            instance=secrets.token_hex(4),
            stop_timeout=self.stop_timeout,
            gpu_uuids=tuple(gpu.uuid for gpu in gpus),
        )
        command = deployment.command(install.binary, backends, self.exit_timeout_secs)
        with deployment.starting():
            deployment.launch(command, triton_binary.server_environment(install) | cuda_environment(gpus))
            deployment.wait_until_ready(self.ready_timeout)
        return deployment


def prepare_run_directory(install: triton_binary.TritonInstallation, run_dir: Path) -> Path:
    """The run directory with its backend directory (Python backend and stub copies); TargetError when the file
    system refuses (a full disk, a read-only directory), naming the directory and the reason in one line."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        return triton_binary.prepare_backend_directory(install, run_dir)
    except OSError as error:
        raise TargetError(
            f"cannot write the server's files in {run_dir}: {error.strerror or error}",
            hint="free disk space there, or choose another --run-dir",
        ) from error


@dataclass
class LocalDeployment(Deployment):
    """A running tritonserver (own session / process group) serving one model. Leaving `with` tears it down."""

    model_name: str
    repository: Path
    run_dir: Path
    ports: tuple[int, int, int]  # http, grpc (unused: gRPC is off), metrics
    instance: str  # random, names this deployment's /dev/shm regions (not a secret: nothing is guarded by it)
    stop_timeout: float = 20.0
    gpu_uuids: tuple[str, ...] = ()  # the GPUs the server is given (CUDA_VISIBLE_DEVICES)
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)
    # Deployment's attributes, from the ports and run directory above
    endpoint: str = field(init=False)
    metrics_url: str = field(init=False)
    log_path: Path = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.endpoint = f"http://{LOOPBACK}:{self.ports[0]}"
        self.metrics_url = f"http://{LOOPBACK}:{self.ports[2]}/metrics"
        self.log_path = self.run_dir / "server.log"

    @property
    def shm_prefix(self) -> str:
        """Prefix of the Python backend's /dev/shm regions, unique per deployment so leftovers can be found."""
        return f"recommender_{self.ports[0]}_{self.instance}_"

    def command(self, binary: Path, backend_directory: Path, exit_timeout_secs: int) -> list[str]:
        """The tritonserver command line: no model control API, loopback only, no gRPC, the admin APIs closed."""
        http, _, metrics = self.ports
        return triton_binary.server_command(
            binary,
            self.repository,
            backend_directory,
            address=LOOPBACK,
            http_port=http,
            metrics_port=metrics,
            restricted_api=f"{CLOSED_APIS}:{CLOSED_HEADER}={CLOSED_VALUE}",
            shm_prefix=self.shm_prefix,
            exit_timeout_secs=exit_timeout_secs,
        )

    def launch(self, command: list[str], env: dict[str, str]) -> None:
        """Start the server process in its own session, its output appended to server.log; it dies with this
        process (lifeline.py), and its pid file lets the next run stop what a `kill -9` of this one left."""
        try:
            self._process = start_in_session(command, env, self.run_dir, self.log_path)
        except OSError as error:
            raise TargetError(
                f"cannot start tritonserver: {error}", hint="run `recommender` preflight checks"
            ) from error
        # NoSuchProcess: exited at once; wait_until_ready reports it with the log
        with contextlib.suppress(psutil.NoSuchProcess):
            ServerRecord.of(self._process.pid, self.shm_prefix).write(self.run_dir)

    def failure_hint(self) -> str:
        return self.log_tail() or super().failure_hint()

    def _check_running(self) -> None:
        code = self._process.poll() if self._process else -1
        if code is not None:
            reason = _last_error(self.log_tail(lines=400), self.model_name)
            raise TargetError(
                f"tritonserver exited with code {code} before {self.model_name!r} was ready{reason}",
                hint=self.log_tail(),
            )

    def server_pids(self) -> list[int]:
        """The server process and every descendant (the backend stubs), while running."""
        return process_tree(self._process)

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        """The last `lines` lines of server.log (for error messages)."""
        return log_tail(self.log_path, lines)

    def _stop(self) -> None:
        """Stop the server and stubs: SIGTERM the group, wait for the server, SIGKILL the rest, verify none is left."""
        process, self._process = self._process, None
        if process is None:
            return
        session = process.pid
        # the stubs hold nothing to save once the server is gone (they would notice its death ~1 s later and exit
        # without finalizing): stopped at once after the server; their /dev/shm regions are removed below
        members = _session_members(session, descendants(process.pid))
        stop_session(process, self.stop_timeout, members)
        remove_shared_memory(self.shm_prefix)
        _verify_stopped(session, members)
        (self.run_dir / PID_FILE).unlink(missing_ok=True)


def _last_error(log: str, model_name: str) -> str:
    """': <the last error line naming the model, else the last error line>' from a server log tail, or ''."""
    errors = [line.strip() for line in log.splitlines() if line.startswith(("error:", "E")) and line.strip()]
    about_model = [line for line in errors if f"'{model_name}'" in line]
    return f": {(about_model or errors)[-1][:300]}" if errors else ""


def _session_members(session: int, descendants: list[psutil.Process]) -> list[psutil.Process]:
    """Descendants plus any process still in the server's session (a stub reparented after a crash)."""
    found = {proc.pid: proc for proc in descendants}
    for proc in psutil.process_iter(["name"]):
        if proc.pid != session and proc.info["name"] in SERVER_PROCESS_NAMES and _session_of(proc.pid) == session:
            found.setdefault(proc.pid, proc)
    return list(found.values())


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except OSError:
        return None


def _verify_stopped(session: int, members: list[psutil.Process]) -> None:
    leftovers = [proc.pid for proc in _session_members(session, members) if is_alive(proc)]
    if leftovers:
        raise TargetError(
            f"tritonserver processes still running after teardown: {leftovers}",
            hint=f"kill them by hand: kill -9 {' '.join(map(str, leftovers))}",
        )
