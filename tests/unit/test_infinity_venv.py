"""Infinity's virtualenv counts as made only once its completion marker exists, written after pip succeeded: a
binary left by an install cut short is not taken as an install. pip and venv are faked at the process boundary
(subprocess.run): the real install is the stacks tier's (scripts/tool_venvs.sh infinity)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.targets import infinity_venv


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "infinity"
    monkeypatch.setenv(infinity_venv.ENVIRONMENT, str(folder))
    return folder


def fake_steps(monkeypatch: pytest.MonkeyPatch, steps: list[list[str]], pip_code: int = 0) -> None:
    """venv makes the folder and its binary (as pip's first wheels would); pip answers `pip_code`."""

    def run(step: list[str], **_kwargs: object) -> subprocess.CompletedProcess:
        steps.append(step)
        if step[1:3] == ["-m", "venv"]:
            (Path(step[3]) / "bin").mkdir(parents=True, exist_ok=True)
            (Path(step[3]) / "bin" / infinity_venv.BINARY).write_text("")
            return subprocess.CompletedProcess(step, 0)
        return subprocess.CompletedProcess(step, pip_code)

    monkeypatch.setattr(subprocess, "run", run)


def is_pip(step: list[str]) -> bool:
    return step[1:4] == ["-m", "pip", "install"]


def test_a_binary_without_the_marker_is_installed_again_and_the_marker_comes_last(venv, monkeypatch) -> None:
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / infinity_venv.BINARY).write_text("")  # a killed install: the binary is there, the rest may not be
    steps: list[list[str]] = []
    fake_steps(monkeypatch, steps)
    assert infinity_venv.server_binary(say=lambda line: None) == venv / "bin" / infinity_venv.BINARY
    assert any(is_pip(step) for step in steps)
    assert (venv / infinity_venv.MARKER).read_text() == infinity_venv.REQUIREMENT
    steps.clear()
    infinity_venv.server_binary(say=lambda line: None)  # made: nothing runs again
    assert steps == []


def test_a_failed_install_leaves_no_marker_and_the_next_use_installs_again(venv, monkeypatch) -> None:
    steps: list[list[str]] = []
    fake_steps(monkeypatch, steps, pip_code=1)
    with pytest.raises(TargetError, match="failed"):
        infinity_venv.server_binary(say=lambda line: None)
    assert (venv / "bin" / infinity_venv.BINARY).exists() and not (venv / infinity_venv.MARKER).exists()
    fake_steps(monkeypatch, steps, pip_code=0)
    steps.clear()
    infinity_venv.server_binary(say=lambda line: None)
    assert any(is_pip(step) for step in steps) and infinity_venv.installed(venv)


def test_a_marker_of_other_requirements_is_not_an_install(venv) -> None:
    venv.mkdir()
    (venv / infinity_venv.MARKER).write_text("infinity-emb[server,torch]==0.0.1")
    assert not infinity_venv.installed(venv)
    (venv / infinity_venv.MARKER).write_text(infinity_venv.REQUIREMENT)
    assert infinity_venv.installed(venv)
