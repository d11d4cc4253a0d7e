"""The docker tier: a private Docker engine started and stopped by the tier (engine.py), the CPU serving image of
containers/triton-cpu built on it once (debootstrap + the wheel's tritonserver; cached by version in
RECOMMENDER_IMAGE_CACHE, so a second session loads it), and real `recommender run` jobs with `kind: docker`.

Skipped, with the reason, where Docker cannot start (not root, docker.io not installed, dockerd failing) or the image
cannot be made here (no debootstrap)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.docker.builder import image_builder
from tests.docker.engine import Engine, why_unavailable


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/docker/" in str(item.fspath):
            item.add_marker(pytest.mark.docker)


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """A private dockerd for the session, the DOCKER_HOST of every docker command (ours and the jobs'); always
    stopped, its folder removed, failed tests or not."""
    reason = why_unavailable()
    if reason is not None:
        pytest.skip(f"no Docker engine: {reason}")
    engine = Engine(Path(tempfile.mkdtemp(prefix="rd-", dir="/tmp")))
    previous = os.environ.get("DOCKER_HOST")
    try:
        failure = engine.start()
        if failure is not None:
            pytest.skip(f"no Docker engine: {failure}")
        os.environ["DOCKER_HOST"] = engine.host
        yield engine
    finally:
        if previous is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = previous
        engine.stop()


@pytest.fixture(scope="session")
def cpu_image(engine: Engine) -> str:
    """The tag of the CPU serving image on the engine: built once, then loaded from the cache."""
    if shutil.which("debootstrap") is None:
        pytest.skip("debootstrap is not installed (bash scripts/install_system_packages.sh installs it)")
    builder = image_builder()
    try:
        return builder.ensure_image(log=lambda line: None)
    except builder.BuildFailed as error:
        pytest.fail(f"the CPU image could not be built: {error}")


@pytest.fixture
def no_container_left(engine: Engine) -> Iterator[None]:
    """Every test starts on an empty engine, and whatever a failed test left is removed for the next one."""
    assert engine.containers() == []
    yield
    left = [line.split()[0] for line in engine.containers()]
    if left:
        engine.docker("rm", "--force", *left)
