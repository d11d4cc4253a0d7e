"""The local target against the real tritonserver from the nvidia-pytriton wheel."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psutil
import pytest

from recommender.errors import TargetError
from recommender.hardware import Gpu
from recommender.targets.local import CLOSED_APIS, CLOSED_HEADER, CLOSED_VALUE, LocalDeployment
from recommender.targets.registry import get_target
from recommender.targets.server_process import LOOPBACK
from recommender.targets.triton_binary import libpython_path

pytestmark = pytest.mark.integration

SERVER_NAMES = {"tritonserver", "triton_python_backend_stub"}


def infer(endpoint: str, model: str, inputs: dict[str, np.ndarray]) -> tuple[int, dict]:
    """POST a KServe v2 JSON inference request; returns (HTTP status, body)."""
    payload = {
        "inputs": [
            {"name": name, "shape": list(array.shape), "datatype": "INT64", "data": array.flatten().tolist()}
            for name, array in inputs.items()
        ]
    }
    request = urllib.request.Request(
        f"{endpoint}/v2/models/{model}/infer",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def running_server_processes(pids: list[int]) -> list[int]:
    alive = []
    for pid in pids:
        try:
            proc = psutil.Process(pid)
            if proc.status() != psutil.STATUS_ZOMBIE and proc.name() in SERVER_NAMES:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


@pytest.fixture
def deploy(tmp_path: Path, repository_for):
    """Deploy a repository for an optimization; every deployment is torn down at the end of the test."""
    started: list[LocalDeployment] = []

    def start(optimization: str, instance_group_count: int = 1, **settings) -> LocalDeployment:
        target = get_target("local", ready_timeout=90)
        target.preflight()
        repository = repository_for(optimization, instance_group_count, **settings)
        deployment = target.deploy(repository, "model", tmp_path / f"run-{optimization}")
        started.append(deployment)
        return deployment

    yield start
    for deployment in started:
        deployment.teardown()


@pytest.mark.parametrize(("optimization", "instance_group_count"), [("pt", 2), ("onnx", 1)])
def test_serves_batch_matching_in_process_model(
    deploy, pooling_model, token_ids, optimization: str, instance_group_count: int
) -> None:
    import torch

    with deploy(optimization, instance_group_count) as deployment:
        pids = deployment.server_pids()
        assert len(pids) == 1 + instance_group_count  # the server and one stub process per instance
        status, body = infer(deployment.endpoint, "model", token_ids)
        assert status == 200, body
        (output,) = body["outputs"]
        assert output["name"] == "embedding" and output["datatype"] == "FP32" and output["shape"] == [2, 8]
        with torch.inference_mode():
            expected = pooling_model(*(torch.from_numpy(array) for array in token_ids.values())).numpy()
        np.testing.assert_allclose(np.array(output["data"]).reshape(2, 8), expected, rtol=1e-5, atol=1e-6)
        stats = deployment.statistics()["model_stats"][0]
        assert stats["name"] == "model" and stats["inference_count"] == 2 and stats["execution_count"] == 1
        assert deployment.log_path.is_file()
    assert running_server_processes(pids) == []


CLOSED_CALLS = [
    ("POST", "/v2/repository/index"),
    ("POST", "/v2/repository/models/model/unload"),
    ("GET", "/v2/systemsharedmemory/status"),
    ("GET", "/v2/trace/setting"),
    ("GET", "/v2/logging"),
]


def raw_http(port: int, method: str, path: str, header: bytes) -> bytes:
    """One HTTP/1.1 request written byte for byte (urllib refuses a line feed in a header); the status line, or b''
    when the server closed the connection without an answer."""
    with socket.create_connection((LOOPBACK, port), timeout=10) as sock:
        sock.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: x\r\n".encode()
            + header
            + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        )
        answer = b"".join(iter(lambda: sock.recv(4096), b""))
    return answer.split(b"\r\n", 1)[0]


def tries_at(value: str) -> list[bytes]:
    """The closed header sent as near to `value` as HTTP allows: absent, raw, CRLF, folded, without, with a space."""
    sent = [
        value,
        value.replace("\n", "\r\n"),
        value.replace("\n", "\r\n "),
        value.replace("\n", ""),
        value.replace("\n", " "),
    ]
    return [b"", *(f"{CLOSED_HEADER}: {text}\r\n".encode() for text in sent)]


def test_admin_apis_are_closed_even_to_the_value_on_the_command_line(deploy) -> None:
    deployment = deploy("pt")
    argv = psutil.Process(deployment.server_pids()[0]).cmdline()
    (restriction,) = [arg for arg in argv if arg.startswith("--http-restricted-api=")]
    apis, value = restriction.removeprefix("--http-restricted-api=").split("=", 1)
    assert apis == f"{CLOSED_APIS}:{CLOSED_HEADER}" and value == CLOSED_VALUE  # a constant: no secret on argv
    answers = {
        (path, attempt): raw_http(deployment.ports[0], method, path, attempt)
        for method, path in CLOSED_CALLS
        for attempt in tries_at(value)
    }
    assert set(answers.values()) <= {b"", b"HTTP/1.1 403 Forbidden"}, answers  # refused, or dropped unanswered
    assert {answers[path, b""] for _, path in CLOSED_CALLS} == {b"HTTP/1.1 403 Forbidden"}
    assert raw_http(deployment.ports[0], "GET", "/v2/health/ready", b"") == b"HTTP/1.1 200 OK"  # still serving


def test_statistics_need_no_header_no_model_control_and_metrics_are_served(deploy) -> None:
    deployment = deploy("pt")
    with urllib.request.urlopen(f"{deployment.endpoint}/v2/models/model/stats", timeout=10) as response:
        assert json.loads(response.read())["model_stats"][0]["name"] == "model"
    with urllib.request.urlopen(f"{deployment.endpoint}/v2/models/model/config", timeout=10) as response:
        assert json.loads(response.read())["name"] == "model"  # read-only, and perf_analyzer needs it
    assert deployment.triton.ready()
    assert deployment.triton.headers == {}
    assert deployment.statistics()["model_stats"][0]["name"] == "model"
    metadata = deployment.triton.metadata()
    assert [tensor["name"] for tensor in metadata["inputs"]] == ["input_ids", "attention_mask"]
    with urllib.request.urlopen(deployment.metrics_url, timeout=10) as response:
        assert b"nv_inference_request_success" in response.read()
    stub = psutil.Process(deployment.server_pids()[1])
    assert str(libpython_path()) in {Path(m.path).as_posix() for m in stub.memory_maps()}


def test_exception_inside_with_still_tears_down(deploy) -> None:
    deployment = deploy("onnx")
    pids = deployment.server_pids()
    with pytest.raises(RuntimeError, match="boom"), deployment:
        raise RuntimeError("boom")
    assert running_server_processes(pids) == []
    assert deployment.server_pids() == []
    deployment.teardown()  # idempotent


def test_model_that_fails_to_load_fails_fast_with_the_log(tmp_path: Path, repository_for) -> None:
    repository = repository_for("pt")
    (repository / "model" / "1" / "model.pt").unlink()
    (repository / "model" / "1" / "model.pt").write_bytes(b"not a torchscript file")
    with pytest.raises(TargetError) as failure:
        get_target("local", ready_timeout=90).deploy(repository, "model", tmp_path / "run")
    assert "exited" in failure.value.message and "failed to load 'model' version 1" in failure.value.message
    assert "PytorchStreamReader" in failure.value.hint  # the server log tail says why
    leftovers = [
        p.pid for p in psutil.process_iter(["name", "cmdline"]) if str(repository) in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


def test_dynamic_batching_runs_concurrent_requests_as_one_batch(deploy, pooling_model) -> None:
    import torch

    deployment = deploy("pt", queue_delay_us=300_000)  # 0.3 s: four concurrent requests surely meet in the queue
    rng = np.random.default_rng(7)
    requests = [
        {
            "input_ids": rng.integers(0, 64, size=(1, 6), dtype=np.int64),
            "attention_mask": np.ones((1, 6), dtype=np.int64),
        }
        for _ in range(4)
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(lambda inputs: infer(deployment.endpoint, "model", inputs), requests))
    for inputs, (status, body) in zip(requests, replies, strict=False):
        assert status == 200, body
        with torch.inference_mode():
            expected = pooling_model(*(torch.from_numpy(array) for array in inputs.values())).numpy()
        np.testing.assert_allclose(np.array(body["outputs"][0]["data"]).reshape(1, 8), expected, rtol=1e-5, atol=1e-6)
    stats = deployment.statistics()["model_stats"][0]
    assert stats["inference_count"] == 4 and stats["execution_count"] < 4  # batched, and split back per request


@pytest.mark.parametrize(("padding", "batched"), [("none", True), ("max", False)])
def test_requests_of_different_lengths_batch_only_when_ragged(deploy, pooling_model, padding, batched) -> None:
    """padding: none sends each request at its own length. Triton's dynamic batcher batches requests of one shape
    only, unless the inputs allow ragged batches (the `none` candidate's config): then model.py pads them within the
    batch, and each answer still matches the model on its own request."""
    import torch

    deployment = deploy("pt", queue_delay_us=300_000, padding=padding)  # 0.3 s: the four meet in the queue
    rng = np.random.default_rng(11)
    requests = [
        {
            "input_ids": rng.integers(1, 64, size=(1, length), dtype=np.int64),
            "attention_mask": np.ones((1, length), dtype=np.int64),
        }
        for length in (3, 5, 6, 9)
    ]
    with ThreadPoolExecutor(max_workers=4) as pool:
        replies = list(pool.map(lambda inputs: infer(deployment.endpoint, "model", inputs), requests))
    for inputs, (status, body) in zip(requests, replies, strict=True):
        assert status == 200, body
        with torch.inference_mode():
            expected = pooling_model(*(torch.from_numpy(array) for array in inputs.values())).numpy()
        np.testing.assert_allclose(np.array(body["outputs"][0]["data"]).reshape(1, 8), expected, rtol=1e-5, atol=1e-6)
    stats = deployment.statistics()["model_stats"][0]
    assert stats["inference_count"] == 4
    assert (stats["execution_count"] < 4) is batched, stats["execution_count"]


def test_the_server_and_its_stubs_are_given_exactly_their_gpus_by_uuid(tmp_path: Path, repository_for) -> None:
    """NVML indices are not CUDA ordinals: CUDA_VISIBLE_DEVICES names the server's GPUs by UUID, with
    CUDA_DEVICE_ORDER=PCI_BUS_ID (a made-up UUID on this CPU host: the KIND_CPU model loads all the same)."""
    gpu = Gpu(1, "NVIDIA H100", 81559.0, uuid="GPU-00000000-made-up")
    target = get_target("local", ready_timeout=90)
    with target.deploy(repository_for("onnx", 1), "model", tmp_path / "run", (gpu,)) as deployment:
        environments = [psutil.Process(pid).environ() for pid in deployment.server_pids()]
        assert deployment.gpu_uuids == (gpu.uuid,) and len(environments) >= 2  # tritonserver and a stub
        for environ in environments:
            assert (environ["CUDA_VISIBLE_DEVICES"], environ["CUDA_DEVICE_ORDER"]) == (gpu.uuid, "PCI_BUS_ID")
