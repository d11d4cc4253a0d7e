"""A server process this platform starts on this host (tritonserver, infinity_emb): started in a session of its own
with its output appended to a log, dying with this process (lifeline.py); its process tree; the tail of its log.
What differs per server (command, readiness, how it is stopped and what it leaves) stays in its deployment."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from collections import deque
from pathlib import Path

import psutil

from recommender.targets.lifeline import die_with_parent


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
