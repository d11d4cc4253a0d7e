"""The docker target's least exposure, against a fake `docker` executable (no engine here): labelled containers
published on loopback only, no model control API, a failed start removes its container, cleanup by label."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.targets.docker import DockerTarget, labelled_containers, remove_containers
from tests.fake_docker import calls, install_fake_docker


@pytest.fixture
def fake(tmp_path, monkeypatch) -> Path:
    return install_fake_docker(tmp_path / "bin", monkeypatch)


@pytest.fixture
def repository(tmp_path) -> Path:
    (tmp_path / "repo" / "model").mkdir(parents=True)
    return tmp_path / "repo"


def test_run_arguments_label_the_run_publish_on_loopback_and_allow_no_model_control() -> None:
    arguments = DockerTarget(run_id="r1", gpus=None).run_arguments("recommender-ab", Path("/repo"), "model")
    assert arguments[arguments.index("--label") + 1] == "recommender.run-id=r1"
    assert arguments[arguments.index("--publish") + 1] == "127.0.0.1::8000"
    assert "--model-control-mode=none" in arguments and "--allow-grpc=false" in arguments
    assert not any(arg.startswith("--load-model") for arg in arguments)


def test_a_failed_docker_run_removes_its_container(fake, repository, tmp_path) -> None:
    (fake / "run.rc").write_text("125")
    with pytest.raises(TargetError, match=r"docker run failed: .*port is already allocated"):
        DockerTarget(run_id="r1").deploy(repository, "model", tmp_path / "run")
    run, *rest = calls(fake)
    name = run.split("--name ")[1].split()[0]
    assert f"rm --force {name}" in rest


def test_a_port_published_beyond_loopback_is_refused_and_the_container_removed(fake, repository, tmp_path) -> None:
    (fake / "port.out").write_text("0.0.0.0:32768\n[::]:32768\n")
    with pytest.raises(TargetError, match=r"publishes port 8000 beyond loopback: 0.0.0.0:32768"):
        DockerTarget(run_id="r1").deploy(repository, "model", tmp_path / "run")
    assert any(call.startswith("rm --force recommender-") for call in calls(fake))


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


def test_a_cpu_run_starts_its_container_without_gpus(fake, repository, tmp_path) -> None:
    (fake / "port.out").write_text("127.0.0.1:32768\n")
    with pytest.raises(TargetError):  # the fake engine serves no HTTP: readiness fails; the `docker run` is what counts
        DockerTarget(run_id="r1", gpus="all", accelerator="cpu", ready_timeout=0.5).deploy(
            repository, "model", tmp_path / "run"
        )
    run = next(call for call in calls(fake) if call.startswith("run "))
    assert "--gpus" not in run and "--label recommender.run-id=r1" in run
