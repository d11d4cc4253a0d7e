"""The `llamacpp` target: llama.cpp's OpenAI-compatible `llama-server` (from a virtualenv of its own: llamacpp_venv.py)
on loopback, one server per candidate, serving the Llama folder vLLM serves (model.source llama: modelrepo/llama.py)
converted to GGUF (gguf.py) to streamed chat or completions requests.

    LlamaCppTarget().deploy(model_folder, "model", run_dir, config=candidate.config()) -> LlamaCppDeployment

Each candidate's settings (GGUF type, parallel slots, batch and micro-batch sizes, threads, continuous batching:
spec/llamacpp.py) come with it as its `engine`, and become llama-server's flags. The context is the Llama's
(llama.CONTEXT tokens) per slot: llama-server divides its --ctx-size among its slots. Ready when GET /health answers
200 (it answers 503 while the model loads) and one completion of one token answers.

The converter runs with vLLM's virtualenv's Python (torch, transformers, numpy and sentencepiece: what
convert_hf_to_gguf.py imports; llama.cpp's own virtualenv has none of them), made on first use as vLLM's own.

Its server's life (a session of its own, a pid file for what a `kill -9` of the job left, a log in the run
directory, torn down on every exit path) is local_stack.py's.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from recommender.errors import TargetError
from recommender.hardware import Gpu
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.targets import llamacpp_venv, vllm_venv
from recommender.targets.gguf import gguf_file
from recommender.targets.leftovers import stop_leftovers
from recommender.targets.local_stack import LocalStackDeployment
from recommender.targets.server_process import LOOPBACK, free_loopback_ports
from recommender.targets.wire import OPENAI_CHAT

PREFIX = "/v1"
HEALTH = "/health"  # 200 once the model is loaded, 503 while it loads
PROCESS_NAMES = frozenset({"llama-server"})  # what a killed job's server left


@dataclass
class LlamaCppDeployment(LocalStackDeployment):
    """A running llama-server serving one GGUF file; leaving `with` stops it."""

    server: str = "llama.cpp's llama-server"
    protocol: str = OPENAI_CHAT

    def _answers_ready(self) -> bool:
        """GET /health answers 200: the model is loaded (llama-server answers 503 until then)."""
        try:
            self._call("GET", HEALTH, "readiness", None, 2.0)
            return True
        except TargetError:
            return False


@dataclass
class LlamaCppTarget:
    """llama.cpp's llama-server on this host's CPU: one server per candidate."""

    name: ClassVar[str] = "llamacpp"
    load_shares_host: ClassVar[bool] = True
    deploys: ClassVar[bool] = False  # no Triton repository: the server loads the GGUF file itself
    native_backends: ClassVar[bool] = False
    protocol: str = OPENAI_CHAT
    stream: bool = True
    settings: LlamaCppSettings = field(default_factory=LlamaCppSettings)  # without a candidate's (config)
    ready_timeout: float = 300.0
    stop_timeout: float = 20.0

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> LlamaCppTarget:
        return cls(
            protocol=target.protocol,
            stream=target.stream,
            settings=target.llamacpp.settings()[0],
            ready_timeout=target.ready_timeout_seconds,
        )

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        """llama.cpp's virtualenv is there (built now, once, when it is not), and the converter's Python."""
        llamacpp_venv.server_binary()
        converter_python()

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> LlamaCppDeployment:
        """Start llama-server on the model folder `repository` converted to GGUF, with the candidate's settings
        (`config`'s engine; the target's own without one); returns once it is healthy and has generated a token."""
        if repository is None or not (Path(repository) / "config.json").exists():
            raise TargetError(
                f"the llamacpp target serves a Hugging Face model folder (converted to GGUF), and {repository} is none",
                hint="model.source llama builds one (modelrepo/llama.py)",
            )
        if gpus:
            raise TargetError("the llamacpp target serves on the CPU: its llama.cpp is built without CUDA")
        settings = LlamaCppSettings.from_engine(config["engine"]) if config and config.get("engine") else self.settings
        venv = llamacpp_venv.ensure_installed()
        model = gguf_file(
            Path(repository),
            settings.gguf_type,
            llamacpp_venv.converter(venv),
            converter_python(),
            llamacpp_venv.REQUIREMENT,
        )
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        stop_leftovers(run_dir, PROCESS_NAMES)
        (port,) = free_loopback_ports(1)
        deployment = LlamaCppDeployment(
            f"http://{LOOPBACK}:{port}{PREFIX}",
            model_name,
            prefix=PREFIX,
            run_dir=run_dir,
            stop_timeout=self.stop_timeout,
            protocol=self.protocol,
            stream=self.stream,
        )
        deployment.log_path = run_dir / "server.log"
        with deployment.starting():
            launched = command(
                llamacpp_venv.server_path(venv), model, model_name, port, settings, context_of(repository)
            )
            deployment.launch(launched, {})
            deployment.wait_until_ready(self.ready_timeout)
            deployment.answers_one_token()
        return deployment


def command(
    binary: Path,
    model: Path,
    served_name: str,
    port: int,
    settings: LlamaCppSettings,
    context: int,
    host: str = LOOPBACK,
) -> list[str]:
    """The server's command line: the GGUF file under the served name, on `host` (loopback here; the deliverable's
    on every interface), the Llama's context per slot (none given where the slots are llama-server's own: its
    context is then its own too), the chat template the file holds (--jinja: the Llama folder's), then the
    candidate's settings."""
    slots = [] if settings.parallel is None else ["--ctx-size", str(context * settings.parallel)]
    return [
        str(binary),
        "--model", str(model),
        "--alias", served_name,
        "--host", host,
        "--port", str(port),
        *slots,
        "--jinja",
        "--no-webui",
        *settings.flags(),
    ]  # fmt: skip


def context_of(folder: Path) -> int:
    """The model's context in tokens (its config.json's max_position_embeddings); TargetError when it has none."""
    try:
        context = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))["max_position_embeddings"]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise TargetError(f"{folder}/config.json gives no max_position_embeddings ({error})") from None
    if isinstance(context, bool) or not isinstance(context, int) or context < 1:
        raise TargetError(f"{folder}/config.json: max_position_embeddings is {context!r}, not a count of tokens")
    return context


def converter_python(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The Python the GGUF converter runs with: vLLM's virtualenv's (a GPU build where only that one is there),
    made on first use as vLLM's own."""
    for gpu in (False, True):
        if vllm_venv.installed(vllm_venv.venv_dir(gpu), gpu):
            return vllm_venv.venv_dir(gpu) / "bin" / "python"
    return vllm_venv.server_python(False, say)


__all__ = ["LlamaCppDeployment", "LlamaCppTarget"]
