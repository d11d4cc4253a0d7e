"""`recommender run` exits 1 when no candidate was measured (each failed, was skipped or was incorrect), still printing
the table: scripts and CI can tell. The endpoint is real (the null endpoint behind the remote target); the budget an
earlier run spent leaves none for any candidate, so every one is skipped before any load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.decide.budget import estimate_plan
from recommender.load.null_endpoint import NullEndpoint
from recommender.store.results import ResultStore
from tests.unit.test_pipeline_budget import remote_spec


@pytest.mark.parametrize("as_json", [False, True], ids=["table", "json"])
def test_a_run_with_nothing_measured_exits_1_after_the_table(tmp_path: Path, as_json: bool) -> None:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store = ResultStore.open(url)
    with NullEndpoint(delay_ms=1) as endpoint:
        spec = remote_spec(endpoint, budget=1.0)
        store.save_experiment(spec)
        store.add_spend(spec.name, 1.0 - estimate_plan(spec, 1).usd / 2)  # less than one candidate's estimate left
        path = tmp_path / "budgeted.yaml"
        path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_unset=True)))
        args = ["run", str(path), "--db", url, "--run-dir", str(tmp_path / "runs"), *(["--json"] if as_json else [])]
        done = CliRunner().invoke(build_app(), args, env={"COLUMNS": "250"})
    assert done.exit_code == 1, done.output
    assert "no candidate was measured" in done.output and "Traceback" not in done.output
    if as_json:
        document = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
        assert document["recommended"] is None and document["no_winner_reason"]
    else:
        assert done.output.count("skipped") >= 2 and "No recommendation" in done.output
    assert [r.status for r in store.results(spec.name)] == ["skipped", "skipped"]
