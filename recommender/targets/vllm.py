"""The `vllm` target: vLLM's OpenAI-compatible server (`python -m vllm.entrypoints.openai.api_server`, from a
virtualenv of its own: vllm_venv.py) on loopback, one server per candidate, serving a model folder (model.source
llama: modelrepo/llama.py) to streamed chat or completions requests.

    VllmTarget(engine_args={"max_num_seqs": 8}).deploy(model_folder, "model", run_dir) -> VllmDeployment

One configuration per candidate (candidates.vllm_candidates: the target's `engine_args`, or a variant's values of
them, stored in the candidate's configuration; `engine_args`, passed as flags: max_num_seqs -> --max-num-seqs 8, true ->
--flag, false -> --no-flag); an argument the installed vLLM does not know is refused by name before any server
starts, from the flags its `--help` lists (read once per virtualenv and kept beside it). On the CPU it runs eager
(--enforce-eager: a start takes about 35 s instead of 80, the graphs it would compile first do not pay back in a
benchmark's minutes) with a small KV cache (VLLM_CPU_KVCACHE_SPACE, `kv_cache_gib`), no model hub and no usage
statistics. Ready when GET /v1/models lists the model and one completion of one token answers.

Its server's life (a session of its own, a pid file for what a `kill -9` of the job left, a log in the run
directory, torn down on every exit path) is local_stack.py's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from recommender.candidates import DEFAULT_KV_CACHE_GIB, engine_settings
from recommender.errors import InputError, TargetError
from recommender.hardware import Gpu, cuda_environment, detect_hardware, resolve_accelerator
from recommender.targets import vllm_venv
from recommender.targets.leftovers import stop_leftovers
from recommender.targets.local_stack import LocalStackDeployment
from recommender.targets.server_process import LOOPBACK, free_loopback_ports
from recommender.targets.wire import OPENAI_CHAT, OPENAI_COMPLETIONS, Wire, openai

PREFIX = "/v1"
CHAT, COMPLETIONS = OPENAI_CHAT, OPENAI_COMPLETIONS
# the server, its API process and its engine's processes (named by setproctitle): what a killed job's server left
PROCESS_NAMES = frozenset({"python", "python3", "VLLM::EngineCore", "VLLM::EngineCor", "VLLM::Worker"})
QUIET = {  # no model hub, no usage statistics: everything it serves is on this host
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "VLLM_API_KEY": "",  # a server of ours, on loopback, takes no key (one set for another server is not ours)
}
FLAGS_FILE = ".recommender-flags.json"  # beside the virtualenv's marker: the flags its --help lists
_FLAG = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*")
ENGINE_ARG = re.compile(r"^[a-z][a-z0-9_]*$")
# the engine's configuration line at start and its dtype there (not kv_cache_dtype's, not a head's: no word before)
_ENGINE_DTYPE = re.compile(r"LLM engine \(v[^)]*\) with config: .*?(?<![\w.])dtype=torch\.(\w+)")
# set by the target itself: an engine argument may not give them
EngineValue = bool | int | float | str
OWN_FLAGS = frozenset({"--model", "--served-model-name", "--host", "--port", "--tokenizer"})


@dataclass
class VllmDeployment(LocalStackDeployment):
    """A running vLLM server serving one model folder; leaving `with` stops it."""

    server: str = "the vLLM server"
    protocol: str = CHAT
    stream: bool = True

    @property
    def wire(self) -> Wire:
        """Chat or completions, streamed unless the target says not: the generative wire (its path and answer check
        are wire.py's)."""
        return openai(self.prefix, self.protocol, self.stream)

    @property
    def generation_path(self) -> str:
        """Where a request is POSTed: <prefix>/chat/completions or <prefix>/completions."""
        return self.wire.path(self.model_name)

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict:
        """POST one request, unstreamed; the answer, which must hold a choice with text."""
        asked = {key: value for key, value in body.items() if key not in ("stream", "stream_options")}
        what = f"a {self.protocol} request for model {self.model_name!r}"
        answer = self._call("POST", self.generation_path, what, asked, timeout_s)
        choices = answer.get("choices") if isinstance(answer, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TargetError(f"{what} at {self.endpoint} answered no choices: {str(answer)[:200]}")
        return answer

    def _answers_ready(self) -> bool:
        """GET <prefix>/models lists the model (the engine has loaded it)."""
        try:
            return self.model_name in (self.served_models() or [])
        except TargetError:
            return False


@dataclass
class VllmTarget:
    """vLLM on this host (its CPU here; its GPUs where the host has them): one server per candidate."""

    name: ClassVar[str] = "vllm"
    load_shares_host: ClassVar[bool] = True
    deploys: ClassVar[bool] = False  # no Triton repository: vLLM loads the model folder itself
    native_backends: ClassVar[bool] = False
    protocol: str = CHAT
    stream: bool = True
    # the target's engine arguments (a list: a variant's values); a candidate's own are in its configuration
    engine_args: Mapping[str, EngineValue | list[EngineValue]] = field(default_factory=dict)
    kv_cache_gib: float = 1.0
    accelerator: str = "auto"  # the target's: which build its virtualenv holds (vllm-cpu, or vllm on a GPU host)
    ready_timeout: float = 300.0
    stop_timeout: float = 20.0

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> VllmTarget:
        return cls(
            protocol=target.protocol,
            stream=target.stream,
            engine_args=dict(target.engine_args),
            kv_cache_gib=target.kv_cache_gib if not isinstance(target.kv_cache_gib, list) else DEFAULT_KV_CACHE_GIB,
            accelerator=target.accelerator,
            ready_timeout=target.ready_timeout_seconds,
        )

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        """vLLM's virtualenv for where it serves is there (made now, once, when it is not: a GPU refused on a host
        without one first) and it knows every engine argument, with each of its values."""
        gpu = resolve_accelerator(self.accelerator, detect_hardware()) == "gpu"
        setting_flags(self.engine_args, known_flags(vllm_venv.server_python(gpu)))

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> VllmDeployment:
        """Start the server on the model folder `repository` (a Hugging Face folder: config, weights, tokenizer) with
        the candidate's engine settings (`config`'s, else the target's own); returns once it lists the model and has
        generated one token."""
        if repository is None or not (Path(repository) / "config.json").exists():
            raise TargetError(
                f"the vllm target serves a Hugging Face model folder, and {repository} is none",
                hint="model.source llama builds one (modelrepo/llama.py)",
            )
        python = vllm_venv.server_python(gpu=bool(gpus))
        engine_args, kv_cache_gib = self.settings(config)
        flags = engine_flags(engine_args, known_flags(python))  # refused before anything starts
        run_dir = Path(run_dir).resolve()
        run_dir.mkdir(parents=True, exist_ok=True)
        stop_leftovers(run_dir, PROCESS_NAMES)
        (port,) = free_loopback_ports(1)
        deployment = VllmDeployment(
            f"http://{LOOPBACK}:{port}{PREFIX}",
            model_name,
            prefix=PREFIX,
            run_dir=run_dir,
            stop_timeout=self.stop_timeout,
            protocol=self.protocol,
            stream=self.stream,
        )
        deployment.log_path = run_dir / "server.log"
        deployment.metrics_url = f"http://{LOOPBACK}:{port}/metrics"  # its counters: tokens in and out, requests
        deployment.gpu_uuids = tuple(gpu.uuid for gpu in gpus)
        with deployment.starting():
            launched = command(python, Path(repository), model_name, port, flags, eager=not gpus)
            deployment.launch(launched, self.environment(gpus, kv_cache_gib))
            deployment.wait_until_ready(self.ready_timeout)
            deployment.answers_one_token()
        deployment.served_dtype = logged_dtype(deployment.log_path)
        return deployment

    def settings(self, config: Mapping[str, Any] | None) -> tuple[dict[str, EngineValue], float]:
        """The engine arguments and KV cache (GiB) to serve with: the candidate's (its stored engine settings), else
        the target's own, which are then one value each."""
        if config is not None and config.get("engine"):
            settings = engine_settings(config)
            return settings, float(settings.pop("kv_cache_gib", self.kv_cache_gib))
        listed = [name for name, value in self.engine_args.items() if isinstance(value, list)]
        if listed:
            raise TargetError(f"engine setting {listed[0]} lists values: deploy a candidate (its configuration)")
        return {
            name: value for name, value in self.engine_args.items() if not isinstance(value, list)
        }, self.kv_cache_gib

    def environment(self, gpus: tuple[Gpu, ...], kv_cache_gib: float | None = None) -> dict[str, str]:
        """QUIET, the CPU's KV cache size, and exactly the candidate's GPUs by UUID (none on the CPU)."""
        kv = self.kv_cache_gib if kv_cache_gib is None else kv_cache_gib
        return QUIET | cuda_environment(gpus) | {"VLLM_CPU_KVCACHE_SPACE": f"{kv:g}"}


def logged_dtype(log: Path) -> str | None:
    """The dtype the engine serves at, as its start log says (`Initializing a V1 LLM engine (v0.32.0) with config:
    model=..., dtype=torch.bfloat16, ...`: what `--dtype auto` resolved to, e.g. this float32 Llama downcast to
    bf16 on the CPU), e.g. "bfloat16"; None when the log has no such line."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    found = _ENGINE_DTYPE.findall(text)
    return found[-1] if found else None


def command(python: Path, model: Path, served_name: str, port: int, flags: list[str], eager: bool = True) -> list[str]:
    """The server's command line: the model folder under the served name, loopback only, then `served_flags`."""
    return [
        str(python),
        "-m",
        vllm_venv.MODULE,
        "--model",
        str(model),
        "--served-model-name",
        served_name,
        "--host",
        LOOPBACK,
        "--port",
        str(port),
        *served_flags(flags, eager),
    ]


def served_flags(flags: list[str], eager: bool) -> list[str]:
    """The engine flags as served: `--enforce-eager` first where the server runs eager (the CPU's default) unless
    the engine arguments say (`enforce_eager: true / false`)."""
    said = any(flag in ("--enforce-eager", "--no-enforce-eager") for flag in flags)
    return (["--enforce-eager"] if eager and not said else []) + flags


def engine_flags(engine_args: Mapping[str, EngineValue], known: frozenset[str]) -> list[str]:
    """The engine arguments as command-line flags, each one the installed vLLM lists; InputError (exit 2: the
    experiment file's setting) naming the first it does not know, or one the target sets itself."""
    flags: list[str] = []
    for name, value in engine_args.items():
        flag = flag_of(name, value)
        if flag in OWN_FLAGS or flag not in known or not ENGINE_ARG.match(name):
            said = f"{name}: {str(value).lower()}" if isinstance(value, bool) else name
            raise InputError(
                f"target.engine_args.{said} {_refusal(flag)} ({flag})",
                hint="`python -m vllm.entrypoints.openai.api_server --help` in the vLLM virtualenv lists the engine "
                "arguments (the flag names, with _ for -)",
            )
        flags += [flag] if isinstance(value, bool) else [flag, str(value)]
    return flags


def setting_flags(engine_args: Mapping[str, EngineValue | list[EngineValue]], known: frozenset[str]) -> list[str]:
    """engine_flags for every value of every setting (a variant's list, each value): what the target's candidates
    can pass, each refused as engine_flags refuses it."""
    return [
        flag
        for name, value in engine_args.items()
        for one in (value if isinstance(value, list) else [value])
        for flag in engine_flags({name: one}, known)
    ]


def flag_of(name: str, value: EngineValue) -> str:
    """An engine argument's flag: max_num_seqs -> --max-num-seqs; a false switch -> --no-<flag>."""
    flag = "--" + name.replace("_", "-")
    return "--no-" + flag[2:] if isinstance(value, bool) and not value else flag


def _refusal(flag: str) -> str:
    if flag in OWN_FLAGS:
        return "is set by the vllm target itself"
    return f"is not an argument of vLLM {vllm_venv.VERSION}"


def known_flags(python: Path) -> frozenset[str]:
    """The flags the virtualenv's server lists in its --help: read once (about 8 s) and kept beside the virtualenv,
    for the requirement it was made with."""
    folder = python.parent.parent
    cache = folder / FLAGS_FILE
    made_with = (folder / vllm_venv.MARKER).read_text(encoding="utf-8") if (folder / vllm_venv.MARKER).exists() else ""
    try:
        kept = json.loads(cache.read_text(encoding="utf-8"))
        if kept.get("requirement") == made_with and kept.get("flags"):
            return frozenset(kept["flags"])
    except (OSError, ValueError, AttributeError):
        pass
    flags = help_flags(python)
    with contextlib.suppress(OSError):  # unkept: read again next time
        cache.write_text(json.dumps({"requirement": made_with, "flags": sorted(flags)}), encoding="utf-8")
    return flags


def help_flags(python: Path) -> frozenset[str]:
    """Every --flag the server's --help names; TargetError when it does not answer."""
    done = subprocess.run(
        [str(python), "-m", vllm_venv.MODULE, "--help"],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | QUIET,
        timeout=180,
    )
    flags = frozenset(_FLAG.findall(done.stdout))
    if done.returncode != 0 or "--model" not in flags:
        tail = (done.stderr or done.stdout).strip().splitlines()
        raise TargetError(
            f"`{python} -m {vllm_venv.MODULE} --help` failed (exit {done.returncode}): {tail[-1] if tail else ''}",
            hint=f"the vLLM virtualenv may be broken: remove {python.parent.parent} (it is made again on first use)",
        )
    return flags


__all__ = ["CHAT", "COMPLETIONS", "VllmDeployment", "VllmTarget"]
