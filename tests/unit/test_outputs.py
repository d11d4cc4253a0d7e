"""Outputs never clobber: --out refuses an existing file or a non-empty folder without --force (exit 2, naming the
path and the flag), and names read from input files never leave the folder chosen for them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from recommender.cli import main
from recommender.errors import InputError
from recommender.files.destination import inside
from recommender.spec import load_spec
from tests.unit.seeded_study import seed_study

DATA = Path(__file__).resolve().parents[1] / "data"
JOB = json.loads((DATA / "sagemaker_job.json").read_text())


@pytest.fixture(autouse=True)
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "500")
    return tmp_path


def cli(capsys: pytest.CaptureFixture, *args: object) -> tuple[int, str]:
    try:
        main([str(arg) for arg in args])
    except SystemExit as done:
        return done.code, capsys.readouterr().err
    raise AssertionError("main() always exits")


@pytest.fixture
def db(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    seed_study(url)
    return url


def test_report_refuses_an_existing_file_without_force(capsys, tmp_path, db) -> None:
    out = tmp_path / "report.md"
    out.write_text("my notes")
    code, err = cli(capsys, "report", "seed-study", "--db", db, "--out", out)
    assert code == 2 and f"error: {out} already exists; not writing over it without --force" in err
    assert "hint: Pass --force to replace it, or choose another --out." in err
    assert out.read_text() == "my notes"
    assert cli(capsys, "report", "seed-study", "--db", db, "--out", out, "--force")[0] == 0
    assert out.read_text().startswith("# ")


def test_report_refuses_a_folder(capsys, tmp_path, db) -> None:
    code, err = cli(capsys, "report", "seed-study", "--db", db, "--out", tmp_path, "--force")
    assert code == 2 and f"error: {tmp_path} is a folder; --out names the file to write" in err


def test_export_refuses_a_file_as_its_folder(capsys, tmp_path, db) -> None:
    (tmp_path / "deploy").write_text("not a folder")
    code, err = cli(capsys, "export", "seed-study", "--db", db, "--out", tmp_path / "deploy", "--force")
    assert code == 2 and f"error: {tmp_path / 'deploy'} is a file; --out names a folder to write into" in err


def test_export_refuses_a_non_empty_folder_before_building_anything(capsys, tmp_path, db) -> None:
    (tmp_path / "deploy").mkdir()
    (tmp_path / "deploy" / "keep.txt").write_text("mine")
    code, err = cli(capsys, "export", "seed-study", "--db", db, "--out", tmp_path / "deploy")
    assert code == 2 and f"error: {tmp_path / 'deploy'} is not empty; not writing into it without --force" in err
    assert sorted(p.name for p in (tmp_path / "deploy").iterdir()) == ["keep.txt"]


def write_job(tmp_path: Path, **changes: object) -> Path:
    path = tmp_path / "job.json"
    path.write_text(json.dumps({**JOB, **changes}))
    return path


def test_import_refuses_an_existing_experiment_file_without_force(capsys, tmp_path) -> None:
    out = tmp_path / "mine.yaml"
    out.write_text("name: mine\n")
    code, err = cli(capsys, "import", "sagemaker-job", write_job(tmp_path), "--out", out)
    assert code == 2 and f"error: {out} already exists; not writing over it without --force" in err
    assert out.read_text() == "name: mine\n"
    assert cli(capsys, "import", "sagemaker-job", write_job(tmp_path), "--out", out, "--force")[0] == 0
    assert load_spec(out).name == "bert-base-load-test"


def test_import_names_the_file_after_the_job_inside_the_chosen_folder(capsys, tmp_path) -> None:
    (tmp_path / "experiments").mkdir()
    assert cli(capsys, "import", "sagemaker-job", write_job(tmp_path), "--out", tmp_path / "experiments")[0] == 0
    assert (tmp_path / "experiments" / "bert-base-load-test.yaml").is_file()
    assert cli(capsys, "import", "sagemaker-job", write_job(tmp_path))[0] == 0  # default: the working folder
    assert (tmp_path / "bert-base-load-test.yaml").is_file()


@pytest.mark.parametrize("name", ["../escaped", "/tmp/absolute", "sub/dir", "..", ".hidden", "a\\b", "two\nlines", ""])
def test_a_job_name_that_is_not_a_plain_name_is_refused(capsys, tmp_path, name) -> None:
    code, err = cli(capsys, "import", "sagemaker-job", write_job(tmp_path, JobName=name))
    assert code == 2 and "JobName" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["job.json"]  # nothing written anywhere


def test_notes_are_emitted_as_yaml_data_never_as_text(capsys, tmp_path) -> None:
    """A value from the job that looks like YAML stays a string inside `notes` (no injected keys)."""
    hostile = "arn:aws:iam::1:role/R\nname: injected\n# NOTE"
    code, err = cli(
        capsys, "import", "sagemaker-job", write_job(tmp_path, RoleArn=hostile), "--out", tmp_path / "x.yaml"
    )
    assert code == 0, err
    written = yaml.safe_load((tmp_path / "x.yaml").read_text())
    assert written["name"] == "bert-base-load-test"
    assert any(hostile in note for note in written["notes"])
    assert load_spec(tmp_path / "x.yaml").notes == written["notes"]


def test_a_name_cannot_follow_a_link_out_of_its_folder(tmp_path) -> None:
    (tmp_path / "inside").mkdir()
    (tmp_path / "inside" / "job.yaml").symlink_to(tmp_path / "elsewhere.yaml")
    with pytest.raises(InputError, match="leads outside"):
        inside(tmp_path / "inside", "job.yaml", "JobName")
    assert inside(tmp_path / "inside", "other.yaml", "JobName") == tmp_path / "inside" / "other.yaml"
