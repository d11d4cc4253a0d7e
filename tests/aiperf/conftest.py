"""The AIPerf tier: real AIPerf (.venvs/aiperf, made by scripts/tool_venvs.sh) against a real Infinity embeddings
server serving the packaged all-MiniLM-L6-v2 on CPU, on loopback; both stopped with their process groups.

The Infinity server is started here, small and self-contained, until a product launcher for it exists."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.load.generators import free_port
from recommender.modelrepo.model_source import minilm_dir
from tests.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
AIPERF = ROOT / ".venvs" / "aiperf" / "bin" / "aiperf"
AIPERF_SETUP = "bash scripts/tool_venvs.sh aiperf"
# Infinity's own venv: the project's, else the one this host was prepared with
INFINITY = [ROOT / ".venvs" / "infinity" / "bin" / "infinity_emb", Path("/tmp/venvs/infinity/bin/infinity_emb")]
INFINITY_SETUP = (
    "python3 -m venv .venvs/infinity && .venvs/infinity/bin/pip install 'infinity-emb[server,torch]==0.0.78'"
)
SERVED_NAME = "minilm"


@pytest.fixture(scope="session")
def aiperf_binary() -> Path:
    if not AIPERF.exists():
        pytest.skip(f"no AIPerf here: {AIPERF_SETUP}")
    return AIPERF


@pytest.fixture(scope="session")
def infinity_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Base URL of an Infinity server (embeddings at POST /embeddings, readiness at GET /health)."""
    binary = next((path for path in INFINITY if path.exists()), None)
    if binary is None:
        pytest.skip(f"no Infinity server here: {INFINITY_SETUP}")
    folder, port = tmp_path_factory.mktemp("infinity"), free_port()
    command = [str(binary), "v2", "--model-id", str(minilm_dir()), "--engine", "torch", "--device", "cpu"]
    command += ["--served-model-name", SERVED_NAME, "--port", str(port), "--host", "127.0.0.1"]
    log = (folder / "server.log").open("w")
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while not _healthy(url):
            assert server.poll() is None, (folder / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "Infinity did not answer /health within 180 s"
            time.sleep(1)
        yield url
    finally:
        stop_group(server)
        log.close()


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False
