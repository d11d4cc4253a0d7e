"""containers/triton/serve run for real: the wheel's tritonserver behind the SageMaker frontend (/ping,
/invocations)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from recommender.targets import triton_binary
from recommender.targets.server_process import free_loopback_ports
from tests.processes import stop_group

pytestmark = pytest.mark.integration

SERVE = Path(__file__).resolve().parents[2] / "containers" / "triton" / "serve"
BINARY_JSON = "application/vnd.sagemaker-triton.binary+json"


def _post(url: str, body: bytes, content_type: str) -> tuple[int, str, bytes]:
    request = urllib.request.Request(url, data=body, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Content-Type", ""), response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.headers.get("Content-Type", ""), error.read()


def _ping(url: str) -> int:
    try:
        with urllib.request.urlopen(f"{url}/ping", timeout=1) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code
    except (urllib.error.URLError, OSError):
        return 0


@pytest.fixture
def served(repository_for, tmp_path):
    """`serve` started as SageMaker would (no model name: auto-detected), on a free loopback port."""
    install = triton_binary.preflight()
    repository = repository_for("pt")
    backends = triton_binary.prepare_backend_directory(install, tmp_path / "run")
    port = free_loopback_ports(1)[0]
    env = triton_binary.server_environment(install) | {
        "TRITON_BINARY": str(install.binary),
        "SAGEMAKER_MODEL_REPOSITORY": str(repository),
        "SAGEMAKER_BIND_TO_PORT": str(port),
        "SAGEMAKER_TRITON_LOG_VERBOSE": "0",
        "SAGEMAKER_TRITON_THREAD_COUNT": "4",
        "SAGEMAKER_TRITON_ADDITIONAL_ARGS": f"--backend-directory={backends} "
        f"--backend-config=python,shm-region-prefix-name=serve_test_{port}_",
    }
    env.pop("SAGEMAKER_TRITON_DEFAULT_MODEL_NAME", None)
    log = (tmp_path / "serve.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, str(SERVE)], env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while _ping(url) != 200:
            assert process.poll() is None, (tmp_path / "serve.log").read_text()
            assert time.monotonic() < deadline, "no 200 on /ping within 120 s"
            time.sleep(0.2)
        yield url, tmp_path / "serve.log"
    finally:
        stop_group(process)
        log.close()


def _expected(pooling_model, token_ids) -> np.ndarray:
    import torch

    with torch.no_grad():
        return pooling_model(
            torch.from_numpy(token_ids["input_ids"]), torch.from_numpy(token_ids["attention_mask"])
        ).numpy()


def test_serve_answers_ping_and_json_and_binary_invocations(served, pooling_model, token_ids) -> None:
    url, log_path = served
    expected = _expected(pooling_model, token_ids)
    assert "WARNING: No SAGEMAKER_TRITON_DEFAULT_MODEL_NAME provided" in log_path.read_text()
    assert "--allow-http=false" in log_path.read_text()

    body = {
        "inputs": [
            {"name": name, "shape": list(value.shape), "datatype": "INT64", "data": value.flatten().tolist()}
            for name, value in token_ids.items()
        ]
    }
    status, _, answer = _post(f"{url}/invocations", json.dumps(body).encode(), "application/json")
    assert status == 200, answer
    output = json.loads(answer)["outputs"][0]
    assert output["name"] == "embedding" and output["shape"] == [2, 8]
    np.testing.assert_allclose(np.array(output["data"], dtype=np.float32).reshape(2, 8), expected, rtol=1e-5, atol=1e-6)

    header = {
        "inputs": [
            {
                "name": name,
                "shape": list(value.shape),
                "datatype": "INT64",
                "parameters": {"binary_data_size": value.nbytes},
            }
            for name, value in token_ids.items()
        ],
        "outputs": [{"name": "embedding", "parameters": {"binary_data": True}}],
    }
    header_bytes = json.dumps(header).encode()
    payload = header_bytes + b"".join(value.tobytes() for value in token_ids.values())
    status, content_type, answer = _post(
        f"{url}/invocations", payload, f"{BINARY_JSON};json-header-size={len(header_bytes)}"
    )
    assert status == 200, answer
    assert content_type.startswith(BINARY_JSON), content_type
    size = int(content_type.split("json-header-size=")[1])
    reply = json.loads(answer[:size])
    assert reply["outputs"][0]["parameters"]["binary_data_size"] == expected.nbytes
    np.testing.assert_allclose(
        np.frombuffer(answer[size:], dtype=np.float32).reshape(2, 8), expected, rtol=1e-5, atol=1e-6
    )
