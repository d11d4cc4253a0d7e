"""Child processes the tests start in a session of their own (start_new_session=True): stopped with their whole
group, so nothing they started is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def stop_group(process: subprocess.Popen, wait_s: float = 20) -> None:
    """SIGTERM to the process's group, SIGKILL after `wait_s` seconds if it is still there."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def run_recommender(workdir: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """`recommender ARGS` as a user runs it (a process of its own, in `workdir`), this checkout's package first, with
    HOME inside `workdir`: what it builds under ~/.cache (a Llama folder, its GGUF files) is the test's own. The
    caller's environment (a tier's RECOMMENDER_*_VENV) is passed on."""
    env = {
        **os.environ,
        "HOME": str(workdir / "home"),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
