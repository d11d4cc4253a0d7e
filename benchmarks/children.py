"""Child commands of a benchmark that leave nothing behind: a `recommender run` or a peer tool (Model Analyzer), each in
a session of its own, told to stop with SIGTERM when the benchmark is interrupted (Ctrl-C, or SIGTERM through
`stop_on_sigterm`) so that it tears down its own servers, then killed as a group if it has not stopped in time.

    stop_on_sigterm()                                  # in main(): SIGTERM raises KeyboardInterrupt, as Ctrl-C does
    run(command, capture_output=True, text=True, cwd=...)   -> subprocess.CompletedProcess (as subprocess.run)
    sys.exit(exit_interrupted(main))                   # interrupted: one line on stderr and exit status 130
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from typing import Any

GRACE_S = 60.0  # a `recommender run` tears its server down in about a second; Model Analyzer waits on its own


def stop_on_sigterm() -> None:
    signal.signal(signal.SIGTERM, _interrupt)


def exit_interrupted(main: Callable[[], int | None]) -> int | None:
    """main(), or on Ctrl-C / SIGTERM (its children stopped by `run`) one line and exit status 130, no traceback."""
    try:
        return main()
    except KeyboardInterrupt:
        print(
            "interrupted: the child under way was stopped (its servers torn down); nothing is left running",
            file=sys.stderr,
        )
        return 130


def run(command: list[str], **popen: Any) -> subprocess.CompletedProcess:
    """subprocess.run in a session of its own; on any exception (an interruption) the child's group gets SIGTERM,
    GRACE_S to stop, then SIGKILL, and the exception goes on."""
    if popen.pop("capture_output", False):
        popen |= {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
    with subprocess.Popen(command, start_new_session=True, **popen) as process:
        try:
            stdout, stderr = process.communicate()
        except BaseException:
            _stop(process)
            raise
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


def _stop(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=GRACE_S)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)  # whatever of the group is left (a server the child did not stop)
    process.wait()


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
