"""Child processes die with their parent: the kernel sends them SIGKILL when the process that started them dies,
even by `kill -9` (Linux `prctl(PR_SET_PDEATHSIG)`); elsewhere nothing is done and the pid file
(targets/leftovers.py) is the only net."""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from collections.abc import Callable

PR_SET_PDEATHSIG = 1


def die_with_parent() -> Callable[[], None] | None:
    """A `preexec_fn` for subprocess.Popen that ties the child's life to this process (None off Linux).

    Runs in the child between fork and exec: asks for SIGKILL on the parent's death, then exits at once if the
    parent already died in between (the request would come too late)."""
    if not sys.platform.startswith("linux"):
        return None
    parent = os.getpid()
    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != parent:
            os._exit(1)

    return arm


def exit_reason(returncode: int) -> str:
    """How a process ended, in words: its exit code, or the signal that killed it (an illegal instruction said for
    what it usually is)."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        return f"killed by signal {-returncode}"
    if name == "SIGILL":
        return (
            "killed by SIGILL (an illegal instruction: this CPU advertises an instruction set its host does not let "
            "programs run, such as AMX in some VMs, or the binary was built for another CPU)"
        )
    return f"killed by {name}"
