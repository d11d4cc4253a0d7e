"""The tracking tier: a real MLflow tracking server (the `mlflow` package in its own virtualenv, .venvs/mlflow, made
by scripts/tool_venvs.sh), started on loopback with a SQLite backend and a local artifact store, stopped after; and
one with MLflow's own basic-auth app, for the export's credentials."""

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
AUTH_CHECK = ("-m", "mlflow.server.auth", "--help")  # scripts/tool_venvs.sh's check: the basic-auth app imports


ADMIN, ADMIN_PASSWORD = "admin", "tracking-admin-pw-7Qx"  # the basic-auth server's admin (tests/tracking only)


@pytest.fixture(scope="session")
def mlflow_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from _served(tmp_path_factory.mktemp("mlflow"))


@pytest.fixture(scope="session")
def mlflow_auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """MLflow's own basic-auth app (`mlflow server --app-name basic-auth`): every request needs a user and password;
    the admin is ADMIN / ADMIN_PASSWORD, and users without a permission have none (default_permission)."""
    if MLFLOW.exists() and subprocess.run([str(MLFLOW.parent / "python"), *AUTH_CHECK], capture_output=True).returncode:
        pytest.skip(f"MLflow's basic-auth app does not import in .venvs/mlflow (mlflow[auth]): {SETUP}")
    folder = tmp_path_factory.mktemp("mlflow-auth")
    config = folder / "basic_auth.ini"
    config.write_text(
        "[mlflow]\ndefault_permission = NO_PERMISSIONS\n"
        f"database_uri = sqlite:///{folder / 'auth.db'}\nadmin_username = {ADMIN}\nadmin_password = {ADMIN_PASSWORD}\n"
        "authorization_function = mlflow.server.auth:authenticate_request_basic_auth\n"
    )
    env = {"MLFLOW_AUTH_CONFIG_PATH": str(config), "MLFLOW_FLASK_SERVER_SECRET_KEY": "tracking-tier-csrf-key"}
    yield from _served(folder, ["--app-name", "basic-auth"], env)


def _served(folder: Path, extra: list[str] | None = None, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """A tracking server on loopback with a SQLite backend in `folder`, until the generator is closed."""
    if not MLFLOW.exists():
        pytest.skip(f"no MLflow tracking server here: {SETUP} (README command two runs it)")
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
        *(extra or []),
    ]
    log = (folder / "server.log").open("w")
    # no job execution (genai evaluation, scorers): the export needs tracking only, and its job queue lives in a
    # folder of /dev/shm that MLflow leaves behind when it stops
    env = {**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false", **(extra_env or {})}
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
