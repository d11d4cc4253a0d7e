"""Child processes the tests start in a session of their own (start_new_session=True): stopped with their whole
group, so nothing they started is left behind."""

from __future__ import annotations

import os
import signal
import subprocess


def stop_group(process: subprocess.Popen, wait_s: float = 20) -> None:
    """SIGTERM to the process's group, SIGKILL after `wait_s` seconds if it is still there."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
