"""`recommender run` with `kind: docker` on a real Docker engine (the tier's own dockerd) serving the CPU image of
containers/triton-cpu: the candidate is ok, the image's labels are read, the container's log is kept in the run folder,
a CPU run passes no `--gpus`, and no container outlives its job: Ctrl-C, SIGTERM, and `kill -9` followed by the next
run's cleanup, while a second job never removes the first one's containers."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from recommender.store.results import ResultStore
from recommender.targets.docker import image_versions
from tests.docker.builder import ROOT
from tests.docker.engine import Engine
from tests.fixtures_text import TINY_BERT_YAML

pytestmark = pytest.mark.usefixtures("no_container_left")

CONTAINER_TIMEOUT_S = 240.0  # a job's export, reference and start until its container runs, on a busy CI host
EXIT_TIMEOUT_S = 90.0


def experiment(workdir: Path, name: str, image: str, seconds: int) -> Path:
    """A one-candidate (onnx) experiment on the docker target's CPU image, one load phase of `seconds`."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / f"{name}.yaml"
    body = TINY_BERT_YAML.replace("{{", "{").replace("}}", "}")
    path.write_text(
        f"name: {name}\n{body}"
        f"target: {{kind: docker, instance_type: docker-cpu, image_uri: '{image}', gpus: null, accelerator: cpu}}\n"
        "variants: {optimizations: [onnx], dynamic_batching: [false], instance_counts: [1], max_batch_sizes: [4]}\n"
        "traffic:\n  warmup_seconds: 1\n  phases:\n"
        f"    - {{initial_users: 1, spawn_rate: 0, duration_seconds: {seconds}}}\n"
    )
    return path


def job_env() -> dict[str, str]:
    """This checkout first on the path (not an installed recommender), and the engine's DOCKER_HOST (in os.environ)."""
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "COLUMNS": "250", "PYTHONPATH": path}


def start_job(path: Path) -> subprocess.Popen:
    """`recommender run FILE` in its own session (as a shell starts a foreground job), its output in FILE.log."""
    with path.with_suffix(".log").open("w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "recommender", "run", path.name],
            cwd=path.parent,
            env=job_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )


def output(path: Path) -> str:
    return path.with_suffix(".log").read_text()


def container_of(engine: Engine, job: subprocess.Popen, path: Path) -> str:
    """The running container the job started (its owner label names the job's pid)."""
    deadline = time.monotonic() + CONTAINER_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in engine.containers():
            name, state, owner = [*line.split(), "", ""][:3]
            if owner.split(":")[1:2] == [str(job.pid)] and state == "running":
                return name
        assert job.poll() is None, f"the job ended before its container ran:\n{output(path)}"
        time.sleep(0.5)
    raise AssertionError(f"no running container of the job after {CONTAINER_TIMEOUT_S:.0f} s:\n{output(path)}")


def serving(engine: Engine, container: str) -> None:
    """Wait until the container's tritonserver answers ready on its loopback port (the job then measures)."""
    arguments = json.loads(engine.docker("inspect", "--format", "{{json .Args}}", container).stdout)
    (port,) = (arg.split("=", 1)[1] for arg in arguments if arg.startswith("--http-port="))
    deadline = time.monotonic() + CONTAINER_TIMEOUT_S
    while time.monotonic() < deadline:
        ready = f"http://127.0.0.1:{port}/v2/health/ready"
        with contextlib.suppress(OSError), urllib.request.urlopen(ready, timeout=2) as answer:
            if answer.status == 200:
                return
        time.sleep(0.5)
    raise AssertionError(f"container {container} was not ready after {CONTAINER_TIMEOUT_S:.0f} s")


def finished(job: subprocess.Popen, path: Path) -> int:
    try:
        return job.wait(EXIT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
        raise AssertionError(f"the job did not end within {EXIT_TIMEOUT_S:.0f} s:\n{output(path)}") from None


def recommender(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args],
        cwd=workdir,
        env=job_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_images_labels_are_read(engine, cpu_image, tmp_path) -> None:
    versions = image_versions(cpu_image)
    triton = f"nvidia-pytriton-{importlib.metadata.version('nvidia-pytriton')}"
    assert (versions.triton, versions.tensorrt) == (triton, "none")
    assert versions.native is False  # the Python backend only: the job writes the runner's repositories
    doctor = recommender(tmp_path, "doctor", experiment(tmp_path, "labels", cpu_image, seconds=4).name)
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert f"image {cpu_image} versions: Triton {triton}, TensorRT none" in doctor.stdout


def test_a_killed_jobs_container_is_removed_by_the_next_run_which_serves_its_candidate_ok(
    engine, cpu_image, tmp_path
) -> None:
    killed = experiment(tmp_path / "killed", "killed", cpu_image, seconds=300)
    job = start_job(killed)
    container = container_of(engine, job, killed)
    inspected = engine.docker("inspect", "--format", "{{json .HostConfig}}", container)
    host_config = json.loads(inspected.stdout)
    assert host_config["DeviceRequests"] is None and host_config["NetworkMode"] == "host"  # a CPU run: no --gpus
    os.kill(job.pid, signal.SIGKILL)
    job.wait()
    assert [line.split()[0] for line in engine.containers()] == [container]  # nothing could remove it
    listed = recommender(tmp_path, "cleanup", "--older-than", "0s", "--dry-run")  # the labels, as the engine says them
    assert f"would delete container {container}" in listed.stdout, listed.stdout + listed.stderr

    path = experiment(tmp_path / "next", "next", cpu_image, seconds=4)
    code = finished(start_job(path), path)
    assert code == 0, output(path)
    assert engine.containers() == []  # the killed job's container, and its own
    (result,) = ResultStore.open(f"sqlite:///{path.parent / '.recommender/results.db'}").results("next")
    assert result.status == "ok", result.reason
    assert [
        run.backend for run in ResultStore.open(f"sqlite:///{path.parent / '.recommender/results.db'}").runs("next")
    ] == ["python:onnxruntime"]
    (log,) = (path.parent / ".recommender/runs/next").glob("*/server.log")
    assert "Started HTTPService at 127.0.0.1:" in log.read_text()  # the container's own log, kept in the run folder


@pytest.mark.parametrize("how", ["ctrl-c", "sigterm"])
def test_an_interrupted_job_leaves_no_container(engine, cpu_image, tmp_path, how) -> None:
    path = experiment(tmp_path, "interrupted", cpu_image, seconds=300)
    job = start_job(path)
    serving(engine, container_of(engine, job, path))
    time.sleep(2)  # into the measurement
    if how == "ctrl-c":
        os.killpg(job.pid, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole foreground job
    else:
        os.kill(job.pid, signal.SIGTERM)
    assert finished(job, path) != 0
    assert engine.containers() == []
    (log,) = (tmp_path / ".recommender/runs/interrupted").glob("*/server.log")
    assert "Started HTTPService at 127.0.0.1:" in log.read_text()


def test_a_second_job_does_not_remove_the_first_jobs_container(engine, cpu_image, tmp_path) -> None:
    first_path = experiment(tmp_path / "first", "first", cpu_image, seconds=300)
    first = start_job(first_path)
    try:
        mine = container_of(engine, first, first_path)
        second_path = experiment(tmp_path / "second", "second", cpu_image, seconds=300)
        second = start_job(second_path)
        try:
            container_of(engine, second, second_path)  # its deploy, and the cleanup before it, are done
            running = {line.split()[0]: line.split()[1] for line in engine.containers()}
            assert running[mine] == "running"
        finally:
            second.send_signal(signal.SIGTERM)
            finished(second, second_path)
    finally:
        first.send_signal(signal.SIGTERM)
        finished(first, first_path)
    assert engine.containers() == []
