"""The docker target's least exposure, against a fake `docker` executable (the docker tier, tests/docker, runs it on a
real engine): labelled containers on the host's network with HTTP and metrics on loopback only, no model control API,
a failed start removes its container, cleanup by label, and only a dead job's containers are swept."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest

from recommender.errors import TargetError
from recommender.targets.docker import (
    BACKENDS_LABEL,
    DockerTarget,
    abandoned_containers,
    docker,
    labelled_containers,
    owner_label,
    remove_containers,
)
from tests.fake_docker import calls, install_fake_docker


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Path:
    return install_fake_docker(tmp_path / "bin", monkeypatch)


@pytest.fixture
def repository(tmp_path) -> Path:
    (tmp_path / "repo" / "model").mkdir(parents=True)
    return tmp_path / "repo"


def test_run_arguments_bind_loopback_on_the_host_network_label_the_run_and_allow_no_model_control() -> None:
    arguments = DockerTarget(run_id="r1", gpus=None).run_arguments("recommender-ab", Path("/repo"), (8000, 8002))
    labels = [arguments[i + 1] for i, arg in enumerate(arguments) if arg == "--label"]
    assert labels == ["recommender.run-id=r1", f"recommender.owner={owner_label()}"]
    assert arguments[arguments.index("--network") + 1] == "host" and "--publish" not in arguments
    server = arguments[arguments.index(DockerTarget().image) + 1 :]
    assert server[0] == "tritonserver"
    for argument in ("--http-address=127.0.0.1", "--http-port=8000", "--metrics-address=127.0.0.1"):
        assert argument in server
    assert "--metrics-port=8002" in server and "--allow-grpc=false" in server
    assert "--model-control-mode=none" in server and not any(arg.startswith("--load-model") for arg in server)
    assert any(arg.startswith("--http-restricted-api=model-repository,") for arg in server)


def test_a_failed_docker_run_removes_its_container(fake, repository, tmp_path) -> None:
    (fake / "run.rc").write_text("125")
    with pytest.raises(TargetError, match=r"docker run failed: .*port is already allocated"):
        DockerTarget(run_id="r1").deploy(repository, "model", tmp_path / "run")
    run = next(call for call in calls(fake) if call.startswith("run "))
    name = run.split("--name ")[1].split()[0]
    assert f"rm --force {name}" in calls(fake)[calls(fake).index(run) :]


def test_cleanup_removes_labelled_containers_of_the_run_or_older_than(fake) -> None:
    now = datetime.now(UTC)
    old, new = (f"{t:%Y-%m-%d %H:%M:%S} +0000 UTC" for t in (now - timedelta(hours=3), now))
    (fake / "ps.out").write_text(f"recommender-old\t{old}\nrecommender-new\t{new}\n")
    assert labelled_containers(older_than=timedelta(hours=2)) == ["recommender-old"]
    remove_containers(labelled_containers(run_id="r1"))
    assert calls(fake) == [
        "ps --all --filter label=recommender.run-id --format {{.Names}}\t{{.CreatedAt}}",
        "ps --all --filter label=recommender.run-id=r1 --format {{.Names}}\t{{.CreatedAt}}",
        "rm --force recommender-old recommender-new",
    ]


def finished_process_owner() -> str:
    """The owner label of a job that has ended (a real process, run and reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = psutil.Process(child.pid).create_time()
    child.wait()
    return f"{socket.gethostname()}:{child.pid}:{started:.3f}"


def test_only_the_containers_of_a_job_gone_from_this_host_are_abandoned(fake) -> None:
    alive = psutil.Process()
    reused_pid = f"{socket.gethostname()}:{alive.pid}:{alive.create_time() - 100:.3f}"  # the pid, another process
    (fake / "ps.out").write_text(
        f"recommender-dead\t{finished_process_owner()}\n"
        f"recommender-reused\t{reused_pid}\n"
        f"recommender-running\t{owner_label()}\n"
        f"recommender-elsewhere\tanother-host:1:1.000\n"
        f"recommender-odd\t{socket.gethostname()}:x:y\n"
    )
    assert abandoned_containers() == ["recommender-dead", "recommender-reused"]


def test_a_deploy_first_removes_what_a_killed_job_left(fake, repository, tmp_path) -> None:
    (fake / "ps.out").write_text(f"recommender-dead\t{finished_process_owner()}\nrecommender-mine\t{owner_label()}\n")
    (fake / "run.rc").write_text("125")
    with pytest.raises(TargetError):
        DockerTarget(run_id="r1").deploy(repository, "model", tmp_path / "run")
    done = calls(fake)
    assert done.index("rm --force recommender-dead") < next(i for i, c in enumerate(done) if c.startswith("run "))
    assert not any("recommender-mine" in call for call in done if call.startswith("rm "))


@pytest.mark.parametrize(("labels", "native"), [({}, True), ({BACKENDS_LABEL: "python"}, False)])
def test_the_images_label_says_whether_it_serves_native_backends(fake, labels, native) -> None:
    (fake / "image.out").write_text(json.dumps(labels))
    assert DockerTarget(image="any:tag").native_backends is native


def test_the_docker_cli_runs_in_its_own_session(fake) -> None:
    """A terminal's Ctrl-C reaches the job's whole process group: a `docker run` or `docker rm` in that group would be
    cut short, leaving a container the teardown may not see; in its own session the command finishes, then the job's
    teardown removes the container."""
    docker("version")
    (session,) = (fake / "sessions.log").read_text().split()
    assert int(session) != os.getsid(0)


def test_a_cpu_run_starts_its_container_without_gpus(fake, repository, tmp_path) -> None:
    with pytest.raises(TargetError):  # the fake engine serves no HTTP: readiness fails; the `docker run` is what counts
        DockerTarget(run_id="r1", gpus="all", accelerator="cpu", ready_timeout=0.5).deploy(
            repository, "model", tmp_path / "run"
        )
    run = next(call for call in calls(fake) if call.startswith("run "))
    assert "--gpus" not in run and "--label recommender.run-id=r1" in run
