"""model.tar.gz layout for SageMaker's Triton container: model folders at the archive root, links dereferenced."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from recommender.errors import BuildError
from recommender.targets.sagemaker_packaging import package_repository
from tests.fixtures_text import python_backend_repository


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    root = python_backend_repository(tmp_path / "repo", "bert")
    weights = tmp_path / "outside" / "model.onnx"
    weights.parent.mkdir()
    weights.write_bytes(b"\x08\x01onnx-bytes")
    (root / "bert" / "1" / "model.onnx").symlink_to(weights)
    (root / "bert" / "1" / "__pycache__").mkdir()
    (root / "bert" / "1" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"junk")
    return root


def test_archive_has_model_folder_at_root_and_real_files(repository: Path, tmp_path: Path) -> None:
    archive_path = package_repository(repository, tmp_path / "out" / "model.tar.gz", model_name="bert")

    with tarfile.open(archive_path, "r:gz") as archive:
        members = {member.name: member for member in archive.getmembers()}
        assert sorted(members) == ["bert", "bert/1", "bert/1/model.onnx", "bert/1/model.py", "bert/config.pbtxt"]
        assert all(not m.issym() and not m.islnk() for m in members.values())
        assert archive.extractfile("bert/1/model.onnx").read() == b"\x08\x01onnx-bytes"
        assert b'name: "bert"' in archive.extractfile("bert/config.pbtxt").read()
        assert {m.uid for m in members.values()} == {0}

    extracted = tmp_path / "opt-ml-model"
    with tarfile.open(archive_path, "r:gz") as archive:
        archive.extractall(extracted, filter="data")
    assert (extracted / "bert" / "config.pbtxt").is_file()
    assert (extracted / "bert" / "1" / "model.onnx").read_bytes() == b"\x08\x01onnx-bytes"


def test_member_order_is_stable(repository: Path, tmp_path: Path) -> None:
    first = package_repository(repository, tmp_path / "a.tar.gz")
    second = package_repository(repository, tmp_path / "b.tar.gz")
    with tarfile.open(first) as a, tarfile.open(second) as b:
        assert a.getnames() == b.getnames()


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        ({}, "no model folder"),
        ({"bert/config.pbtxt": "x"}, "no numeric version folder"),
    ],
)
def test_bad_repositories_are_refused(tmp_path: Path, layout: dict[str, str], message: str) -> None:
    root = tmp_path / "repo"
    root.mkdir()
    for relative, text in layout.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text)
    with pytest.raises(BuildError, match=message):
        package_repository(root, tmp_path / "model.tar.gz")


def test_unknown_model_name_is_refused(repository: Path, tmp_path: Path) -> None:
    with pytest.raises(BuildError, match="'gpt' not found"):
        package_repository(repository, tmp_path / "model.tar.gz", model_name="gpt")
