"""Shared by every test tier."""

from __future__ import annotations

import signal


def pytest_configure(config) -> None:
    """Ctrl-C tests need Python's SIGINT handler. A POSIX shell starts `&` jobs with SIGINT ignored, and Python then
    keeps it ignored (a suite run as `nohup ./scripts/test.sh &` failed 4 Ctrl-C tests that pass in the foreground);
    restore the handler an interactive run has (processes the tests start then get SIGINT at its default: a caught
    signal is reset on exec, an ignored one is not)."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
