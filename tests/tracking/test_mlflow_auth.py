"""The MLflow export against MLflow's own basic-auth server (`mlflow server --app-name basic-auth`,
tests/tracking/conftest.py): the credentials MLflow's client reads (MLFLOW_TRACKING_USERNAME / _PASSWORD, or a
user:password@ in the URI) are sent, a server that asks for them and gets none says which variables to set, and no
password ever reaches the output. MLFLOW_TRACKING_TOKEN (a bearer token; the basic-auth app takes none) is checked
against a real loopback server that records the header, in tests/unit/test_credentials.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.tracking.conftest import ADMIN, ADMIN_PASSWORD
from tests.tracking.test_mlflow_export import read_back, stored  # noqa: F401  (the stored experiment fixture)

pytestmark = [pytest.mark.integration, pytest.mark.tracking]

VARIABLES = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN")


def export(db: str, uri: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in VARIABLES}
    command = [sys.executable, "-m", "recommender", "export", "tracked", "--db", db, "--mlflow", uri]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**clean, **env})


def test_mlflows_username_and_password_variables_are_sent(mlflow_auth_server, stored) -> None:  # noqa: F811
    db, _ = stored
    done = export(db, mlflow_auth_server, MLFLOW_TRACKING_USERNAME=ADMIN, MLFLOW_TRACKING_PASSWORD=ADMIN_PASSWORD)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 candidates exported to MLflow" in done.stdout
    os.environ.update(MLFLOW_TRACKING_USERNAME=ADMIN, MLFLOW_TRACKING_PASSWORD=ADMIN_PASSWORD)
    try:  # read back by MLflow's own client with the same credentials
        assert len(read_back(mlflow_auth_server, "tracked")) == 2
    finally:
        os.environ.pop("MLFLOW_TRACKING_USERNAME")
        os.environ.pop("MLFLOW_TRACKING_PASSWORD")


def test_a_server_asking_for_credentials_and_getting_none_names_the_variables(mlflow_auth_server, stored) -> None:  # noqa: F811
    db, _ = stored
    done = export(db, mlflow_auth_server)
    said = done.stdout + done.stderr
    assert done.returncode == 2 and "HTTP 401" in said, said
    assert "MLFLOW_TRACKING_USERNAME" in said and "MLFLOW_TRACKING_TOKEN" in said and "Traceback" not in said


def test_a_password_in_the_uri_is_used_and_never_printed(mlflow_auth_server, stored) -> None:  # noqa: F811
    db, _ = stored
    host = mlflow_auth_server.removeprefix("http://")
    done = export(db, f"http://{ADMIN}:{ADMIN_PASSWORD}@{host}")
    assert done.returncode == 0, done.stdout + done.stderr
    assert ADMIN_PASSWORD not in done.stdout + done.stderr and "exported to MLflow at http://admin:***@" in done.stdout
    wrong = export(db, f"http://{ADMIN}:not-the-pw-s3cret@{host}")
    assert wrong.returncode == 2 and "HTTP 401" in wrong.stdout + wrong.stderr
    assert "not-the-pw-s3cret" not in wrong.stdout + wrong.stderr
