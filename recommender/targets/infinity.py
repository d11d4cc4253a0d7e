"""The `infinity` target: the Infinity embedding server (infinity-emb, in a virtualenv of its own) on loopback, one
server per candidate, its engine (torch, optimum) and batch size the candidate's; spoken to through the OpenAI
embeddings API (openai_endpoint.py), so its load, gate, figures and cost are those of every other candidate.

Its server's life (a session of its own, a pid file for what a `kill -9` of the job left, a log in the run directory,
torn down on every exit path) is local_stack.py's.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from recommender.errors import TargetError
from recommender.hardware import Gpu
from recommender.modelrepo.model_source import minilm_dir
from recommender.targets import infinity_venv
from recommender.targets.leftovers import stop_leftovers
from recommender.targets.local_stack import LocalStackDeployment
from recommender.targets.server_process import LOOPBACK, free_loopback_ports

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
class InfinityDeployment(LocalStackDeployment):
    """A running infinity_emb serving the packaged MiniLM; leaving `with` stops it."""

    server: str = infinity_venv.BINARY


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
            deployment.launch(command(infinity_venv.server_binary(), config, port), QUIET)
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
