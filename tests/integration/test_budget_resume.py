"""`recommender run` with a budget across resumes, against a real endpoint with real Locust load: the budget caps
the experiment's total spend, a candidate the rest does not cover is skipped and the run ends cleanly as
budget-exhausted; raising the budget measures it on the next run, the measured one reused."""

from __future__ import annotations

from pathlib import Path

import pytest

from recommender.cli import main
from recommender.decide.budget import estimate_plan
from recommender.load.null_endpoint import NullEndpoint
from recommender.spec import load_spec
from recommender.store.results import ResultStore

pytestmark = pytest.mark.integration

SPEC = """name: budgeted
correctness: off
variants: {{dynamic_batching: [false, true]}}
target: {{kind: remote, endpoint: '{url}/v2/models/existing', price_per_hour: 36.0, budget_usd: {budget}}}
traffic: {{warmup_seconds: 0, phases: [{{initial_users: 1, duration_seconds: 2}}]}}
"""


def run(path: Path, db: str) -> int:
    with pytest.raises(SystemExit) as done:
        main(["run", str(path), "--db", db])
    return done.value.code


def test_budget_caps_the_total_and_a_raised_budget_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "300")
    db = f"sqlite:///{tmp_path / 'results.db'}"
    store = ResultStore.open(db)
    with NullEndpoint(delay_ms=1) as url:
        (tmp_path / "one.yaml").write_text(SPEC.format(url=url, budget=1.0))
        spec = load_spec(tmp_path / "one.yaml")
        per_candidate = estimate_plan(spec, 1).usd  # 2 s of traffic at $36/h: $0.02
        store.save_experiment(spec)
        store.add_spend("budgeted", 1.0 - 1.5 * per_candidate)  # earlier runs: room for one candidate's estimate
        code = run(tmp_path / "one.yaml", db)
        first = {r.name: r for r in store.results("budgeted")}
        # the first candidate was admitted; its billed time (start-up included) may pass the budget before its load
        # ends on a busy host, and then the guard stops it (interrupted, not final). Either way the second is refused.
        measured, refused = first["pt-nodb-ig1-mbs8"], first["pt-db-ig1-mbs8"]
        assert measured.status == "ok" or (measured.status, measured.reason[:8]) == ("interrupted", "budget: "), (
            measured
        )
        # a run that measured no candidate exits 1 (scripts can tell), budget or not
        assert code == (0 if measured.status == "ok" else 1), capsys.readouterr()
        assert (refused.status, refused.reason[:10]) == ("skipped", "budget: $1")
        assert store.experiment("budgeted").status == "budget-exhausted"
        spent = store.spent("budgeted")
        assert spent > 1.0 - per_candidate  # the measured candidate's billed time was stored
        assert "budget exhausted" in capsys.readouterr().out

        (tmp_path / "two.yaml").write_text(SPEC.format(url=url, budget=2.0))
        assert run(tmp_path / "two.yaml", db) == 0, capsys.readouterr()
    second = {r.name: r for r in store.results("budgeted")}
    assert [r.status for r in second.values()] == ["ok", "ok"]
    if measured.status == "ok":
        assert second["pt-nodb-ig1-mbs8"].run_id == measured.run_id  # reused, not measured again
    assert store.experiment("budgeted").status == "done"
    assert store.spent("budgeted") > spent
