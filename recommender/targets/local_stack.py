"""A serving stack this platform starts on this host and speaks to through an OpenAI-compatible API (Infinity, vLLM):
the server process's life, shared by their deployments.

Like tritonserver (local.py): its own session, dies with this process (lifeline.py), a pid file for what a
`kill -9` of the job left (leftovers.py), a log in the run directory, torn down on every exit path (Deployment).
What differs per stack (its command, its readiness, its wire) stays in its own module.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from recommender.errors import TargetError
from recommender.targets.leftovers import PID_FILE, ServerRecord
from recommender.targets.lifeline import exit_reason
from recommender.targets.local import LOG_TAIL_LINES
from recommender.targets.openai_endpoint import OpenAIEndpoint
from recommender.targets.server_process import log_tail, process_tree, start_in_session, stop_session
from recommender.targets.wire import generation_body


@dataclass
class LocalStackDeployment(OpenAIEndpoint):
    """A running server of a local stack (`server` names it in messages); leaving `with` stops it."""

    run_dir: Path = field(default_factory=Path)
    stop_timeout: float = 20.0
    server: str = "the server"
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def launch(self, command: list[str], environment: Mapping[str, str]) -> None:
        """Start the server in its own session (this process's environment with `environment` over it), its output
        appended to the log, its pid and start time written to the run directory's pid file."""
        assert self.log_path is not None  # set by the target's deploy
        try:
            self._process = start_in_session(command, os.environ | dict(environment), self.run_dir, self.log_path)
        except OSError as error:
            raise TargetError(f"cannot start {self.server}: {error}") from error
        with contextlib.suppress(psutil.NoSuchProcess):
            ServerRecord.of(self._process.pid, "").write(self.run_dir)

    def answers_one_token(self, timeout_s: float = 60.0) -> None:
        """One request of one output token through this deployment's own probe: a generative engine generates (its
        API answers before its first step; vLLM and llama.cpp alike)."""
        self.probe(generation_body(self.wire, self.model_name, "ready?", 1, stream=False), timeout_s)

    def server_pids(self) -> list[int]:
        return process_tree(self._process)

    def failure_hint(self) -> str:
        return self.log_tail() or f"See the server log {self.log_path}."

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return log_tail(self.log_path, lines)

    def _check_running(self) -> None:
        code = self._process.poll() if self._process else -1
        if code is not None:
            raise TargetError(
                f"{self.server} {exit_reason(code)} before it served {self.model_name!r}", hint=self.log_tail()
            )

    def _stop(self) -> None:
        """SIGTERM the server's session, wait, SIGKILL what is left, and clear the pid file."""
        process, self._process = self._process, None
        if process is None:
            return
        stop_session(process, self.stop_timeout)  # and every process below it
        (self.run_dir / PID_FILE).unlink(missing_ok=True)
