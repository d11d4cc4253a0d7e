"""What a run directory's server left behind when its job was killed (`kill -9`, a crash, a power cut), found
through the pid file the server's deployment writes, and stopped before the next server starts there.

The pid file holds the server's pid, its start time and its /dev/shm prefix. Only processes that are provably
that server's are stopped: the server itself when its pid AND start time match, and the backend stubs in its
session (its pid as session id, named like a stub, started after it). A reused pid is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

PID_FILE = "server.pid"
START_TIME_TOLERANCE_S = 0.05


@dataclass(frozen=True)
class ServerRecord:
    """The server a deployment started: pid, start time (psutil's create_time) and /dev/shm region prefix."""

    pid: int
    started: float
    shm_prefix: str

    @classmethod
    def of(cls, pid: int, shm_prefix: str) -> ServerRecord:
        return cls(pid, psutil.Process(pid).create_time(), shm_prefix)

    def write(self, run_dir: Path) -> None:
        path = Path(run_dir) / PID_FILE
        path.write_text(json.dumps(asdict(self)))

    @classmethod
    def read(cls, run_dir: Path) -> ServerRecord | None:
        try:
            return cls(**json.loads((Path(run_dir) / PID_FILE).read_text()))
        except (OSError, ValueError, TypeError):
            return None


def stop_leftovers(run_dir: Path, process_names: frozenset[str]) -> list[int]:
    """Kill what the run directory's last server left running and remove its /dev/shm regions and pid file.
    Returns the pids killed."""
    record = ServerRecord.read(run_dir)
    if record is None:
        return []
    leftovers = [proc for proc in _server_and_stubs(record, process_names)]
    for proc in leftovers:
        with contextlib.suppress(psutil.NoSuchProcess):
            proc.kill()
    psutil.wait_procs(leftovers, timeout=5.0)
    remove_shared_memory(record.shm_prefix)
    (Path(run_dir) / PID_FILE).unlink(missing_ok=True)
    return [proc.pid for proc in leftovers]


def remove_shared_memory(prefix: str, shm: Path = Path("/dev/shm")) -> None:
    """Remove the /dev/shm regions named with `prefix` (a killed backend stub could not unlink them)."""
    if not prefix or not shm.is_dir():
        return
    for region in shm.glob(f"{prefix}*"):
        region.unlink(missing_ok=True)


def _server_and_stubs(record: ServerRecord, process_names: frozenset[str]) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "create_time"]):
        if (proc.pid == record.pid and _same_start(proc.info["create_time"], record.started)) or (
            proc.info["name"] in process_names and _in_session(proc, record)
        ):
            found.append(proc)
    return found


def process_is_gone(pid: int, started: float) -> bool:
    """Whether the process `pid` that started at `started` (psutil's create_time) has ended: its pid is free, a zombie,
    or another process's (one started at another time)."""
    try:
        process = psutil.Process(pid)
        return process.status() == psutil.STATUS_ZOMBIE or not _same_start(process.create_time(), started)
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False  # another user's process: it is not gone


def _same_start(started: float | None, recorded: float) -> bool:
    return started is not None and abs(started - recorded) < START_TIME_TOLERANCE_S


def _in_session(proc: psutil.Process, record: ServerRecord) -> bool:
    """In the recorded server's session and started after it (a stub it spawned, maybe reparented)."""
    try:
        return os.getsid(proc.pid) == record.pid and proc.info["create_time"] >= record.started - START_TIME_TOLERANCE_S
    except OSError:
        return False
