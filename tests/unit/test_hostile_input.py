"""Every file a user names, whatever it holds, ends in exit 2 with a message naming the file, the reason and a
hint: never a traceback. Through the real entry point, `recommender.cli.main`, in process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from recommender.cli import main
from recommender.decide.prices import load_catalog
from recommender.errors import CatalogError
from recommender.files.document import MAX_BYTES

ROOT = Path(__file__).resolve().parents[2]
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]\n" for i in range(7)
)  # 10^8 values


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at the terminal width: keep each message on one line
    monkeypatch.delenv("RECOMMENDER_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    """Exit code and stderr of `recommender ARGS`, run in process through main()."""
    with pytest.raises(SystemExit) as done:
        main([str(arg) for arg in args])
    return done.value.code, capsys.readouterr().err


# --- what a file can be: (case, how to make it at a path, what the message says) ---------------------------


def _bytes(data: bytes) -> Callable[[Path], None]:
    return lambda path: path.write_bytes(data)


def _huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: no 10 MiB written
        handle.truncate(MAX_BYTES + 1)


CONTENT = [
    ("not-utf8", _bytes(b"name: caf\xe9\n"), "is not UTF-8 text (byte 0xe9 at offset 9)"),
    ("binary", _bytes(b"\x7fELF\x02\x01\x01\x00\x00"), "is binary (it holds NUL bytes)"),
    ("huge", _huge, "is 10,485,761 bytes, over the 10 MiB limit"),
]
PARSED = [
    ("deep", _bytes(b"[" * 5000 + b"]" * 5000), "is nested more than 64 levels deep"),
    ("deep-but-parseable", _bytes(b"[" * 100 + b"]" * 100), "nested more than 64 levels deep"),
]
YAML_ONLY = [
    ("yaml-bomb", _bytes(BOMB.encode()), "holds more than 1,000,000 values (counting what YAML aliases repeat)"),
    ("self-alias", _bytes(b"name: &a [*a]\n"), "nested more than 64 levels deep"),
    (
        "deep-block",
        _bytes("".join(f"{' ' * i}k{i}:\n" for i in range(200)).encode()),
        "nested more than 64 levels deep",
    ),
    (
        "python-tag",
        _bytes(b"name: !!python/object/apply:os.system [echo hi]\n"),
        "not valid YAML (could not determine a constructor",
    ),
]
PLACE = [
    ("missing", lambda path: None, "no such"),
    ("directory", lambda path: path.mkdir(), "is a directory"),
    ("fifo", lambda path: os.mkfifo(path), "is not a regular file (a device, pipe or socket)"),
]


def _ids(cases: list) -> list[str]:
    return [case[0] for case in cases]


# --- each loader, through the command that reads it --------------------------------------------------------


def validate(path: Path) -> list[str]:
    return ["validate", path]


def import_job(path: Path) -> list[str]:
    return ["import", "sagemaker-job", path, "--out", path.parent / "imported.yaml"]


LOADERS = {"experiment": (validate, "experiment.yaml"), "job request": (import_job, "job.json")}


@pytest.mark.parametrize("loader", list(LOADERS))
@pytest.mark.parametrize(("case", "make", "reason"), CONTENT + PARSED + PLACE, ids=_ids(CONTENT + PARSED + PLACE))
def test_experiment_and_job_files_exit_2_naming_file_and_reason(capsys, tmp_path, loader, case, make, reason) -> None:
    command, name = LOADERS[loader]
    path = tmp_path / name
    make(path)
    code, err = cli(capsys, *command(path))
    assert code == 2, err
    assert f"error: {path}: " in err and reason in err
    assert "hint:" in err and "Traceback" not in err
    assert not (tmp_path / "imported.yaml").exists()


@pytest.mark.parametrize(("case", "make", "reason"), YAML_ONLY, ids=_ids(YAML_ONLY))
def test_yaml_bombs_and_tags_exit_2(capsys, tmp_path, case, make, reason) -> None:
    path = tmp_path / "experiment.yaml"
    make(path)
    code, err = cli(capsys, "validate", path)
    assert (code, f"error: {path}: " in err, reason in err, "Traceback" in err) == (2, True, True, False), err


@pytest.mark.parametrize(
    ("case", "make", "reason"), CONTENT + PARSED + YAML_ONLY, ids=_ids(CONTENT + PARSED + YAML_ONLY)
)
def test_a_broken_refreshed_price_catalog_exits_2(capsys, tmp_path, case, make, reason) -> None:
    path = tmp_path / ".recommender" / "prices.yaml"
    path.parent.mkdir()
    make(path)
    code, err = cli(capsys, "prices", "show")
    assert code == 2 and f"error: {Path('.recommender/prices.yaml')}: " in err and reason in err, err
    assert "hint:" in err


@pytest.mark.parametrize(("case", "make", "reason"), PLACE, ids=_ids(PLACE))
def test_a_price_catalog_named_by_path_is_a_catalog_error(tmp_path, case, make, reason) -> None:
    make(tmp_path / "prices.yaml")
    with pytest.raises(CatalogError, match=re.escape(reason)) as caught:
        load_catalog(tmp_path / "prices.yaml")
    assert caught.value.exit_code == 2 and str(tmp_path / "prices.yaml") in caught.value.message


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ("region: x\n", "price catalog is malformed (KeyError('instances'))"),
        (
            "region: x\nsource: s\nretrieved: d\ninstances: {ml.x: {usd_per_hour: cheap}}\n",
            "usd_per_hour must be a number >= 0",
        ),
        ("region: x\nsource: s\nretrieved: d\ninstances: [1, 2]\n", "price catalog is malformed"),
        ("region: 5\nsource: s\nretrieved: d\ninstances: {}\n", "region must be text, not 5"),
    ],
)
def test_a_malformed_catalog_names_what_is_wrong(capsys, tmp_path, document, reason) -> None:
    (tmp_path / ".recommender").mkdir()
    (tmp_path / ".recommender" / "prices.yaml").write_text(document)
    code, err = cli(capsys, "prices", "show")
    assert code == 2 and reason in err, err


MODEL_CASES = [
    ("missing", lambda path: None, "no such onnx model file"),
    ("directory", lambda path: path.mkdir(), "is a directory, not an onnx model file"),
    (
        "empty",
        _bytes(b""),
        "is not an onnx model file (it is empty; an ONNX file is a protobuf opening with its ir_version)",
    ),
    ("text", _bytes(b"name: x\n"), "is not an onnx model file (it starts with b'n'"),
]


@pytest.mark.parametrize(("case", "make", "reason"), MODEL_CASES, ids=_ids(MODEL_CASES))
def test_a_bad_model_file_is_named_with_its_field(capsys, tmp_path, case, make, reason) -> None:
    make(tmp_path / "model.onnx")
    (tmp_path / "experiment.yaml").write_text("name: mine\nmodel: {source: onnx, path: model.onnx}\n")
    code, err = cli(capsys, "validate", tmp_path / "experiment.yaml")
    assert code == 2, err
    assert f"{tmp_path / 'experiment.yaml'}: model.path: {tmp_path / 'model.onnx'}: {reason}" in err


def test_a_torchscript_file_must_be_a_zip(capsys, tmp_path) -> None:
    (tmp_path / "model.pt").write_bytes(b"\x08\x07onnx")
    (tmp_path / "experiment.yaml").write_text("name: mine\nmodel: {source: torchscript, path: model.pt}\n")
    code, err = cli(capsys, "validate", tmp_path / "experiment.yaml")
    assert code == 2 and "is not a torchscript model file (it starts with b'\\x08\\x07on'" in err, err
    (tmp_path / "model.pt").write_bytes(b"PK\x03\x04rest")
    assert cli(capsys, "validate", tmp_path / "experiment.yaml")[0] == 0


@pytest.mark.parametrize(
    ("case", "make", "reason"),
    CONTENT + PLACE + [("two-lines", _bytes(b"sqlite://\nsqlite://\n"), "holds exactly one line")],
    ids=[*_ids(CONTENT + PLACE), "two-lines"],
)
def test_a_bad_database_url_file_exits_2(capsys, monkeypatch, tmp_path, case, make, reason) -> None:
    make(tmp_path / "db-url")
    monkeypatch.setenv("RECOMMENDER_DB_URL_FILE", str(tmp_path / "db-url"))
    code, err = cli(capsys, "rank", "anything")
    assert code == 2 and f"error: {tmp_path / 'db-url'}: " in err and reason in err, err


def test_a_huge_grid_is_refused_before_it_is_expanded(capsys, tmp_path) -> None:
    sizes = list(range(1, 1025))
    (tmp_path / "grid.yaml").write_text(
        f"name: x\nvariants: {{optimizations: [pt, onnx], instance_counts: "
        f"{list(range(1, 17))}, max_batch_sizes: {sizes}}}\n"
    )
    code, err = cli(capsys, "validate", tmp_path / "grid.yaml")
    assert code == 2 and "variants: Value error, the grid has 65,536 combinations; at most 10,000" in err, err


# --- unreadable: root reads anything, so drop the capabilities that let it (setpriv) in a child process -----


def _unreadable_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: a chmod 000 file stays readable to root")
    return ["setpriv", "--bounding-set", "-dac_override,-dac_read_search"]


@pytest.mark.parametrize(
    ("name", "args", "reason"),
    [
        ("experiment.yaml", ["validate", "{path}"], "{path}: cannot be read (Permission denied)"),
        ("job.json", ["import", "sagemaker-job", "{path}"], "{path}: cannot be read (Permission denied)"),
        ("model.onnx", ["validate", "{spec}"], "{spec}: model.path: {path}: cannot be read (Permission denied)"),
    ],
)
def test_an_unreadable_file_exits_2(tmp_path, name, args, reason) -> None:
    prefix = _unreadable_prefix()
    path, spec = tmp_path / name, tmp_path / "uses-model.yaml"
    path.write_bytes(b"\x08\x07")
    spec.write_text("name: x\nmodel: {source: onnx, path: model.onnx}\n")
    path.chmod(0)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "500"}
    argv = [a.format(path=path, spec=spec) for a in args]
    done = subprocess.run(
        [*prefix, sys.executable, "-m", "recommender", *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert reason.format(path=path, spec=spec) in done.stderr and "Traceback" not in done.stderr
