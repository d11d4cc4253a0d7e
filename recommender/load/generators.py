"""The load generator's processes: one Locust process, or Locust's distributed mode (one master, N workers) on this
host.

Main-process side (no locust import). Every process runs in its own session (so its whole group can be killed), dies
with this process (lifeline.py) and, when CPUs are given, is pinned to them (os.sched_setaffinity after Popen).
A worker that exits while the master still runs is recorded as lost, with its exit status and the time; Locust's
master hands its users to the remaining workers, and the level is flagged (metrics/selfcheck.py).
"""

from __future__ import annotations

import ipaddress
import math
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from recommender.errors import LoadError
from recommender.targets.lifeline import die_with_parent, exit_reason

WORKER_STOP_WAIT_S = 10.0
_TERM_GRACE_S = 3.0
AUTO_CPU_SHARE = 60.0  # `workers: auto`: enough workers that none needs more than this % of a core


LOCUST_MASTER_PORT = 5557  # Locust's own default: the port remote workers try when told only the host
_ANY_ADDRESS = ("0.0.0.0", "::")


@dataclass(frozen=True)
class MasterSettings:
    """Where Locust's master listens and whom it waits for (traffic.master_bind, master_port, remote_workers,
    worker_wait_seconds). Remote workers join with `recommender worker --master HOST:PORT`."""

    bind: str = "127.0.0.1"
    port: int | None = None  # None: an OS-chosen free port, or LOCUST_MASTER_PORT when remote workers are expected
    remote_workers: int = 0
    wait_s: float = 60.0

    @classmethod
    def from_traffic(cls, traffic: Any) -> MasterSettings:
        return cls(traffic.master_bind, traffic.master_port, traffic.remote_workers, traffic.worker_wait_seconds)

    @property
    def channel_warning(self) -> str | None:
        """One line for a bind beyond loopback: Locust's master-worker channel is unauthenticated plain text."""
        if ipaddress.ip_address(self.bind).is_loopback:
            return None
        return (
            f"traffic.master_bind {self.bind} is not loopback: Locust's master-worker channel is unauthenticated and "
            "plain text, so anyone who reaches that port can join the run and read its request bodies (never an API "
            "key: each worker reads target.api_key_env from its own environment); bind to an address only your "
            "workers reach"
        )

    @property
    def local_host(self) -> str:
        """The address this host's workers connect to."""
        return "127.0.0.1" if self.bind in _ANY_ADDRESS else self.bind

    def choose_port(self) -> int:
        """The fixed port (checked free, else LoadError naming the setting) or an OS-chosen one."""
        port = self.port or (LOCUST_MASTER_PORT if self.remote_workers else None)
        if port is None:
            return free_port(self.bind)
        try:
            with socket.socket(socket.AF_INET6 if ":" in self.bind else socket.AF_INET) as probe:
                probe.bind((self.bind, port))
        except OSError as error:
            raise LoadError(
                f"the Locust master cannot listen on {self.bind}:{port}: {error.strerror}",
                hint="set traffic.master_port to a free port (and start the remote workers with it), or "
                "traffic.master_bind to one of this host's addresses",
            ) from None
        return port


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` the OS had free a moment ago (for the master's bind)."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def master_arguments(master: MasterSettings, port: int, workers: int) -> list[str]:
    """Locust's options for the master: bound to `master.bind`, waiting (at most master.wait_s) for `workers`."""
    return [
        "--master",
        "--master-bind-host",
        master.bind,
        "--master-bind-port",
        str(port),
        "--expect-workers",
        str(workers),
        "--expect-workers-max-wait",
        str(math.ceil(master.wait_s)),
    ]


def worker_arguments(host: str, port: int) -> list[str]:
    """Locust's options for a worker joining the master at host:port (its settings come from the master)."""
    return ["--worker", "--master-host", host, "--master-port", str(port)]


def auto_workers(previous_cpu_percent: float | None, cores: int | None) -> int:
    """`workers: auto`: ceil(the generators' total CPU % at the previous run's busiest second / 60), between 1 and
    cores - 1; without a previous run, cores - 1 (as many as the host allows, so the first run is not under-driven)."""
    ceiling = max(1, (cores or 1) - 1)
    if previous_cpu_percent is None:
        return ceiling
    return max(1, min(ceiling, math.ceil(previous_cpu_percent / AUTO_CPU_SHARE)))


def generator_cpus(setting: Sequence[int] | None, available: Sequence[int]) -> tuple[int, ...] | None:
    """The CPUs the generator is pinned to: the setting, or (None) the last quarter of a host with 4 or more CPUs;
    None means no pinning (a 2-core host split 1 + 1 would halve the server)."""
    if setting is not None:
        return tuple(setting)
    cpus = sorted(available)
    if len(cpus) < 4:
        return None
    return tuple(cpus[-max(1, len(cpus) // 4) :])


@dataclass
class GeneratorProcesses:
    """The running generator processes; `lost` lists workers that ended while the master ran."""

    master: subprocess.Popen[bytes]
    workers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    lost: list[dict[str, Any]] = field(default_factory=list)
    cpus: tuple[int, ...] | None = None

    @classmethod
    def launch(
        cls, commands: Sequence[list[str]], env: dict[str, str], out_dir: Path, cpus: tuple[int, ...] | None
    ) -> GeneratorProcesses:
        """Start the commands (the first is the master, or the only process); logs go to out_dir."""
        started = []
        try:
            for number, command in enumerate(commands):
                stem = "locust" if number == 0 else f"locust-worker-{number}"
                started.append(_start(command, env, out_dir, stem, cpus))
        except BaseException:
            for process in started:
                kill_group(process)
            raise
        return cls(started[0], started[1:], cpus=cpus)

    def poll(self) -> bool:
        """True once the master has exited; records any worker that ended before it."""
        for index, worker in enumerate(self.workers):
            already = any(entry["index"] == index for entry in self.lost)
            if not already and worker.poll() not in (None, 0) and self.master.poll() is None:
                self.lost.append(
                    {
                        "at": time.time(),
                        "index": index,
                        "pid": worker.pid,
                        "reason": f"worker {index + 1} (pid {worker.pid}) {exit_reason(worker.returncode)}",
                    }
                )
        return self.master.poll() is not None

    def finish(self) -> None:
        """After the master: let the workers quit on its message, then kill what is left."""
        deadline = time.monotonic() + WORKER_STOP_WAIT_S
        for worker in self.workers:
            try:
                worker.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                kill_group(worker)

    def kill(self) -> None:
        for process in (self.master, *self.workers):
            kill_group(process)


def _start(
    command: list[str], env: dict[str, str], out_dir: Path, stem: str, cpus: tuple[int, ...] | None
) -> subprocess.Popen[bytes]:
    with open(out_dir / f"{stem}.stdout.log", "wb") as stdout, open(out_dir / f"{stem}.stderr.log", "wb") as stderr:
        process = _popen(command, env, out_dir, stdout, stderr)
    if cpus:
        try:
            os.sched_setaffinity(process.pid, cpus)
        except OSError:
            kill_group(process)
            raise
    return process


def _popen(
    command: list[str], env: dict[str, str], out_dir: Path, stdout: IO[bytes], stderr: IO[bytes]
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        command,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        env=env,
        cwd=out_dir,
        start_new_session=True,
        preexec_fn=die_with_parent(),
    )


def kill_group(child: subprocess.Popen[bytes]) -> None:
    """SIGTERM the child's process group, SIGKILL it after a grace period, and reap the child."""
    for signum, grace in ((signal.SIGTERM, _TERM_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(child.pid, signum)
        except ProcessLookupError:
            break
        try:
            child.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    child.wait()
