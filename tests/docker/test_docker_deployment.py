"""A docker deployment in this process, on the tier's engine and CPU image: the container's tritonserver and backend
stub are this host's processes (what the server's CPU figures sample, what the isolation pins), and a server that dies
during the load is reported as a crash."""

from __future__ import annotations

import time

import psutil
import pytest

from recommender.candidates import Candidate
from recommender.errors import TargetError
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import DynamicBatching
from recommender.targets.docker import DockerTarget
from tests.integration.conftest import export_onnx, pooling_module

pytestmark = pytest.mark.usefixtures("no_container_left")


def test_the_containers_server_processes_are_watched_and_a_crash_is_reported(engine, cpu_image, tmp_path) -> None:
    artifact = export_onnx(pooling_module(), tmp_path / "model.onnx")
    candidate = Candidate("onnx", DynamicBatching(max_queue_delay_microseconds=0), 1, 4, "docker")
    repository = write_model_repository(candidate, artifact, tmp_path / "repository")
    target = DockerTarget(image=cpu_image, gpus=None, accelerator="cpu", run_id="deployment-test", ready_timeout=120)
    with target.deploy(repository, "model", tmp_path / "run") as deployment:
        server, *stubs = (psutil.Process(pid) for pid in deployment.server_pids())
        assert server.name() == "tritonserver"
        assert stubs and all(stub.name().startswith("triton_python") for stub in stubs)
        crash = r"the server crashed during the load: tritonserver \(pid \d+\)"
        with pytest.raises(TargetError, match=crash), deployment.watched():
            server.kill()
            psutil.wait_procs([server], timeout=30)
            time.sleep(0.5)  # the engine reaps the container's init
    assert engine.containers() == []
    assert "model_lifecycle" in (tmp_path / "run" / "server.log").read_text()
