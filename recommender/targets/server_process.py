"""A server process this platform starts on this host (tritonserver, infinity_emb): free loopback ports for it;
started in a session of its own with its output appended to a log, dying with this process (lifeline.py); its process
tree; the tail of its log; stopped by session (SIGTERM, then SIGKILL for what is left). What differs per server
(command, readiness, which processes belong to it and what it leaves) stays in its deployment."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections import deque
from pathlib import Path

import psutil

from recommender.targets.lifeline import die_with_parent

LOOPBACK = "127.0.0.1"


def free_loopback_ports(count: int) -> tuple[int, ...]:
    """`count` distinct free TCP ports on 127.0.0.1, chosen by the OS (bind to port 0)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((LOOPBACK, 0))
        return tuple(sock.getsockname()[1] for sock in sockets)
    finally:
        for sock in sockets:
            sock.close()


def start_in_session(command: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> subprocess.Popen:
    """Start `command` as the leader of a new session (so its whole group can be signalled), stdin closed, stdout and
    stderr appended to `log_path`; OSError when it cannot be started."""
    with open(log_path, "ab") as log:
        return subprocess.Popen(
            command,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=die_with_parent(),
        )


def process_tree(process: subprocess.Popen | None) -> list[int]:
    """The process and every descendant, while it runs ([] once it is gone)."""
    if process is None:
        return []
    try:
        server = psutil.Process(process.pid)
        return [server.pid, *(child.pid for child in server.children(recursive=True))]
    except psutil.NoSuchProcess:
        return []


def log_tail(path: Path | None, lines: int) -> str:
    """The last `lines` lines of a log ("" when there is none)."""
    try:
        with open(path or "", errors="replace") as log:
            return "".join(deque(log, maxlen=lines))
    except OSError:
        return ""


def signal_group(group: int, signum: int) -> None:
    """Send `signum` to a process group; a group already gone (or not ours) is left alone."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def is_alive(proc: psutil.Process) -> bool:
    """Running and not a zombie (a killed process holds nothing once it is a zombie)."""
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def wait_gone(procs: list[psutil.Process], timeout: float, poll: float = 0.02) -> None:
    """Until none of `procs` runs. A killed process is a zombie until init reaps it, which can take seconds (1 to 2 s
    on this host), though it holds nothing any more: counted as gone (psutil.wait_procs would wait for the reaping)."""
    deadline = time.monotonic() + timeout
    while any(is_alive(proc) for proc in procs) and time.monotonic() < deadline:
        time.sleep(poll)


def stop_session(process: subprocess.Popen, stop_timeout: float, members: list[psutil.Process] | None = None) -> None:
    """Stop a server started by `start_in_session`: SIGTERM its session, wait up to `stop_timeout` for it, then
    SIGKILL the session and each of `members` (its other processes, e.g. backend stubs; default: its descendants
    now) still running, and wait until they are gone (a zombie counts as gone)."""
    session = process.pid
    if members is None:
        members = descendants(process.pid)
    signal_group(session, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=stop_timeout)
    _, alive = psutil.wait_procs(members, timeout=0)
    signal_group(session, signal.SIGKILL)
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            leftover.kill()
    process.wait()
    wait_gone(alive, timeout=5.0)


def descendants(pid: int) -> list[psutil.Process]:
    """Every process below `pid` ([] once it is gone)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
