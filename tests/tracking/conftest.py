"""The tracking tier: a real MLflow tracking server (the `mlflow` package in its own virtualenv, .venvs/mlflow, made
by scripts/tool_venvs.sh), started on loopback with a SQLite backend and a local artifact store, stopped after."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.load.generators import free_port
from tests.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]
MLFLOW = ROOT / ".venvs" / "mlflow" / "bin" / "mlflow"
SETUP = "bash scripts/tool_venvs.sh mlflow"


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    if not MLFLOW.exists():
        pytest.skip(f"no MLflow tracking server here: {SETUP} (README command two runs it)")
    folder = tmp_path_factory.mktemp("mlflow")
    port = free_port()
    command = [
        str(MLFLOW),
        "server",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        "1",
        "--backend-store-uri",
        f"sqlite:///{folder / 'mlflow.db'}",
        "--artifacts-destination",
        str(folder / "artifacts"),
    ]
    log = (folder / "server.log").open("w")
    # no job execution (genai evaluation, scorers): the export needs tracking only, and its job queue lives in a
    # folder of /dev/shm that MLflow leaves behind when it stops
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
    server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=env)
    uri = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{uri}/health", timeout=2) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert server.poll() is None, (folder / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the MLflow server did not answer /health within 120 s"
            time.sleep(0.5)
        yield uri
    finally:
        stop_group(server)
        log.close()
