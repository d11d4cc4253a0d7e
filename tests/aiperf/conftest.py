"""The AIPerf tier: real AIPerf (.venvs/aiperf, made by scripts/tool_venvs.sh) against a real Infinity embeddings
server serving the packaged all-MiniLM-L6-v2 on CPU, and against a real vLLM server (.venvs/vllm) streaming the tiny
Llama of benchmarks/vllm_endpoint.py (test_aiperf_vllm.py), on loopback; all stopped with their process groups.

The Infinity server is the product's own infinity target (tests/infinity_server.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.infinity_server import infinity_server, infinity_venv_in_use

ROOT = Path(__file__).resolve().parents[2]
AIPERF = ROOT / ".venvs" / "aiperf" / "bin" / "aiperf"
AIPERF_SETUP = "bash scripts/tool_venvs.sh aiperf"


@pytest.fixture(scope="session")
def aiperf_binary() -> Path:
    if not AIPERF.exists():
        pytest.skip(f"no AIPerf here: {AIPERF_SETUP}")
    return AIPERF


@pytest.fixture(scope="session")
def infinity_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of an Infinity server (embeddings at POST /embeddings, readiness at GET /health), started through the
    product's infinity target."""
    with infinity_venv_in_use(), infinity_server(tmp_path_factory.mktemp("infinity")) as url:
        yield url
