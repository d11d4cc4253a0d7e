"""The `infinity` target: the Infinity embedding server (infinity-emb, in a virtualenv of its own) on loopback, one
server per candidate, its engine (torch, optimum) and batch size the candidate's; spoken to through the OpenAI
embeddings API (openai_endpoint.py), so its load, gate, figures and cost are those of every other candidate.

Like tritonserver (local.py): its own session, dies with this process (lifeline.py), a pid file for what a
`kill -9` of the job left, a log in the run directory, torn down on every exit path (Deployment).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import psutil

from recommender.errors import TargetError
from recommender.hardware import Gpu
from recommender.modelrepo.model_source import minilm_dir
from recommender.targets import infinity_venv
from recommender.targets.leftovers import PID_FILE, ServerRecord, stop_leftovers
from recommender.targets.local import LOG_TAIL_LINES
from recommender.targets.openai_endpoint import OpenAIEndpoint
from recommender.targets.server_process import (
    LOOPBACK,
    free_loopback_ports,
    log_tail,
    process_tree,
    start_in_session,
    stop_session,
)

SERVED_NAME = "minilm"  # the model name requests carry
PROCESS_NAMES = frozenset({infinity_venv.BINARY, "python", "python3"})  # leftovers of a killed job's server
QUIET = {  # no model hub, no usage statistics: everything it serves is on this host
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "DO_NOT_TRACK": "1",
    "INFINITY_ANONYMOUS_USAGE_STATS": "0",
    "CUDA_VISIBLE_DEVICES": "",
    "INFINITY_API_KEY": "",  # a server of ours, on loopback, takes no key (one set for another server is not ours)
}


@dataclass
class InfinityDeployment(OpenAIEndpoint):
    """A running infinity_emb serving the packaged MiniLM; leaving `with` stops it."""

    run_dir: Path = field(default_factory=Path)
    stop_timeout: float = 20.0
    _process: subprocess.Popen | None = field(default=None, init=False, repr=False)

    def launch(self, command: list[str]) -> None:
        """Start the server in its own session, its output appended to server.log."""
        assert self.log_path is not None  # set by InfinityTarget.deploy
        try:
            self._process = start_in_session(command, os.environ | QUIET, self.run_dir, self.log_path)
        except OSError as error:
            raise TargetError(f"cannot start {infinity_venv.BINARY}: {error}") from error
        with contextlib.suppress(psutil.NoSuchProcess):
            ServerRecord.of(self._process.pid, "").write(self.run_dir)

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
                f"{infinity_venv.BINARY} exited with code {code} before it served {self.model_name!r}",
                hint=self.log_tail(),
            )

    def _stop(self) -> None:
        """SIGTERM the server's session, wait, SIGKILL what is left, and clear the pid file."""
        process, self._process = self._process, None
        if process is None:
            return
        stop_session(process, self.stop_timeout)  # and every process below it
        (self.run_dir / PID_FILE).unlink(missing_ok=True)


@dataclass
class InfinityTarget:
    """Infinity on this host's CPU: one server per candidate (engine x batch size)."""

    name: ClassVar[str] = "infinity"
    load_shares_host: ClassVar[bool] = True
    deploys: ClassVar[bool] = False  # no Triton repository: Infinity loads the model folder itself
    native_backends: ClassVar[bool] = False
    ready_timeout: float = 300.0
    stop_timeout: float = 20.0

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> InfinityTarget:
        return cls(ready_timeout=target.ready_timeout_seconds)

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        """Infinity's virtualenv is there (made now, once, when it is not) and the model folder is packaged."""
        infinity_venv.server_binary()
        minilm_dir()

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> InfinityDeployment:
        """Start infinity_emb with the candidate's engine and batch size; returns once /health answers."""
        if config is None:
            raise TargetError("the infinity target needs the candidate's configuration (engine, batch size)")
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        stop_leftovers(run_dir, PROCESS_NAMES)
        (port,) = free_loopback_ports(1)
        deployment = InfinityDeployment(
            f"http://{LOOPBACK}:{port}", SERVED_NAME, run_dir=run_dir, stop_timeout=self.stop_timeout
        )
        deployment.log_path = run_dir / "server.log"
        with deployment.starting():
            deployment.launch(command(infinity_venv.server_binary(), config, port))
            deployment.wait_until_ready(self.ready_timeout)
        return deployment


def command(binary: Path, config: Mapping[str, Any], port: int) -> list[str]:
    """The infinity_emb command line: the packaged MiniLM (with an ONNX export beside it for the optimum engine), its
    own pooling, the candidate's engine and batch size, loopback only."""
    engine, model = str(config["optimization"]), minilm_dir()
    return [
        str(binary),
        "v2",
        "--model-id",
        str(infinity_venv.onnx_model_folder(model) if engine == "optimum" else model),
        "--pooling-method",
        infinity_venv.pooling_of(model),
        "--served-model-name",
        SERVED_NAME,
        "--engine",
        engine,
        "--batch-size",
        str(config["max_batch_size"]),
        "--device",
        "cpu",
        "--host",
        LOOPBACK,
        "--port",
        str(port),
    ]
