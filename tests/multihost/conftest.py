"""The multihost tier: real hosts made of network namespaces on a private bridge (lab.py), real tritonserver,
Locust workers and PostgreSQL inside them, `recommender` run inside them as a user would on each host.

    A (10.231.0.1)  recommender run (the Locust master)      B, C (.2, .3)  recommender worker --master A
    D1, D2 (.11, .12)  tritonserver, used as remote targets  E (.20)  PostgreSQL

Skipped, with the reason, where namespaces cannot be made (not root, no iproute2). Every namespace, link and
process of the tier is removed on every exit path (fixture finalizers, and a sweep before each lab is made).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from recommender.candidates import Candidate
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import DynamicBatching
from recommender.targets import triton_binary
from recommender.targets.triton_client import TritonClient
from tests.integration.conftest import export_onnx, pooling_module
from tests.multihost.lab import PREFIX, Lab, address, leftovers, why_unavailable

ROOT = Path(__file__).resolve().parents[2]
HOSTS = ["a", "b", "c", "d1", "d2", "e"]
TRITON_PORT, METRICS_PORT = 8000, 8002


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/multihost/" in str(item.fspath):
            item.add_marker(pytest.mark.multihost)


@pytest.fixture(scope="session")
def lab() -> Iterator[Lab]:
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(f"multihost tier: {reason}")
    made = Lab.create(HOSTS)
    try:  # SIGTERM unwinds like Ctrl-C (tests/conftest.py): the lab is removed
        yield made
    finally:
        made.remove()
    assert leftovers() == [], leftovers()


def cli_env() -> dict[str, str]:
    """This checkout first on the path (the processes in the namespaces run `python -m recommender` from it)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, "COLUMNS": "250"}


def recommender(*args: str) -> list[str]:
    return [sys.executable, "-m", "recommender", *args]


@dataclass
class Server:
    """A tritonserver inside one host, reached on that host's address."""

    host: str
    client: TritonClient

    @property
    def endpoint(self) -> str:
        return f"http://{address(self.host)}:{TRITON_PORT}/v2/models/model"

    def inference_count(self) -> int:
        stats = self.client.statistics()["model_stats"]
        return sum(int(m.get("inference_stats", {}).get("success", {}).get("count", 0)) for m in stats)


VOCAB = 30522  # the packaged bert-uncased tokenizer's: the payload's token ids index it


@pytest.fixture(scope="session")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An ONNX mean-pooling embedding over BERT's vocabulary (random weights, 8 wide): the payload's real token ids."""
    artifact = export_onnx(pooling_module(VOCAB).eval(), tmp_path_factory.mktemp("mh-export") / "model.onnx")
    candidate = Candidate("onnx", DynamicBatching(max_queue_delay_microseconds=0, preferred_batch_size=[]), 1, 4, "d")
    return write_model_repository(candidate, artifact, tmp_path_factory.mktemp("mh-repo"), "model")


def start_triton(lab: Lab, host: str, repository: Path, run_dir: Path) -> Server:
    """tritonserver inside `host`, HTTP and metrics on the host's address; returns once the model is ready."""
    install = triton_binary.preflight()
    backends = triton_binary.prepare_backend_directory(install, run_dir)
    command = triton_binary.server_command(
        install.binary,
        repository,
        backends,
        address=address(host),
        http_port=TRITON_PORT,
        metrics_port=METRICS_PORT,
        shm_prefix=f"{PREFIX}_{host}_",
    )
    with open(run_dir / "server.log", "ab") as log:
        lab.popen(host, command, env=triton_binary.server_environment(install), stdout=log, stderr=log)
    client = TritonClient(f"http://{address(host)}:{TRITON_PORT}", "model")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            if client.ready():
                return Server(host, client)
        except Exception:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"tritonserver on {host} not ready: {(run_dir / 'server.log').read_text()[-2000:]}")


@pytest.fixture(scope="session")
def d1(lab: Lab, repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Server:
    return start_triton(lab, "d1", repository, tmp_path_factory.mktemp("d1"))


@pytest.fixture(scope="session")
def d2(lab: Lab, repository: Path, tmp_path_factory: pytest.TempPathFactory) -> Server:
    return start_triton(lab, "d2", repository, tmp_path_factory.mktemp("d2"))
