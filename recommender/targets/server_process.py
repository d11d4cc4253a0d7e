"""A server process this platform starts on this host (tritonserver, infinity_emb): started in a session of its own
with its output appended to a log, dying with this process (lifeline.py); its process tree; the tail of its log.
What differs per server (command, readiness, how it is stopped and what it leaves) stays in its deployment."""

from __future__ import annotations

import subprocess
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
