"""Shared by every test tier."""

from __future__ import annotations

import functools
import signal

import pytest

SESSION = pytest.StashKey[pytest.Session]()


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C tests need Python's SIGINT handler. A POSIX shell starts `&` jobs with SIGINT ignored, and Python then
    keeps it ignored (a suite run as `nohup ./scripts/test.sh &` failed 4 Ctrl-C tests that pass in the foreground);
    restore the handler an interactive run has (processes the tests start then get SIGINT at its default: a caught
    signal is reset on exec, an ignored one is not)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # SIGTERM unwinds like Ctrl-C: pytest runs every fixture's teardown, so the servers the tests started in sessions
    # of their own (vLLM, Infinity, tritonserver, the multihost lab) are stopped, not orphaned (Python's default for
    # SIGTERM is to die at once, finalizers unrun). scripts/test.sh stops its pytest runs this way.
    signal.signal(signal.SIGTERM, functools.partial(_unwind, config))


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[SESSION] = session


def _unwind(config: pytest.Config, signum: int, frame: object) -> None:
    """KeyboardInterrupt now, and the session told to stop after this test: code under test that handles Ctrl-C
    itself (the CLI's exit 130, run in-process by a test) may swallow the interrupt, and the run must end anyway."""
    session = config.stash.get(SESSION, None)
    if session is not None:
        session.shouldstop = f"signal {signum}"
    raise KeyboardInterrupt(f"signal {signum}")
