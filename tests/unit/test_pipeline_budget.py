"""The job and the budget across resumes: earlier runs' spend (in the store) counts, a candidate the rest of the
budget does not cover is recorded as skipped ("budget: ...") and the job ends cleanly as budget-exhausted.

The endpoint is real (the null endpoint, a child process, behind the remote target); no candidate gets far enough
to send load here: the integration tier measures one and skips the next (tests/integration/test_budget_resume.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from recommender.candidates import expand_candidates
from recommender.decide.budget import estimate_plan
from recommender.job.pipeline import Job, JobOptions
from recommender.load.null_endpoint import NullEndpoint
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore


class Recorder:
    """The Reporter protocol, keeping what the job said."""

    def __init__(self) -> None:
        self.finished: list[tuple[str, str, str | None, bool]] = []

    def candidate_started(self, candidate, index, total, load_seconds) -> None: ...

    def stage(self, candidate, text) -> None: ...

    def load_progress(self, candidate, elapsed_s, users, requests, failures) -> None: ...

    def candidate_finished(self, candidate, status, reason, reused) -> None:
        self.finished.append((candidate.name, status, reason, reused))


def remote_spec(url: str, budget: float) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "budgeted",
            "variants": {"dynamic_batching": [False, True]},
            "target": {
                "kind": "remote",
                "endpoint": f"{url}/v2/models/existing",
                "price_per_hour": 36.0,
                "budget_usd": budget,
            },
            "traffic": {"warmup_seconds": 0, "phases": [{"initial_users": 1, "duration_seconds": 2}]},
        }
    )


def test_a_spent_budget_skips_every_candidate_and_the_job_ends_budget_exhausted(tmp_path: Path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with NullEndpoint(delay_ms=1) as url:
        spec = remote_spec(url, budget=1.0)
        per_candidate = estimate_plan(spec, 1).usd
        store.save_experiment(spec)
        store.add_spend(spec.name, 1.0 - per_candidate / 2)  # an earlier run left less than one candidate's estimate
        reporter = Recorder()
        results = Job(spec, store, JobOptions(run_root=tmp_path / "runs"), reporter).run()
    assert [(r.status, r.reason.split(",")[0]) for r in results] == [
        ("skipped", f"budget: ${1.0 - per_candidate / 2:.2f} of the $1.00 budget spent")
    ] * 2
    assert all("raise target.budget_usd" in r.reason for r in results)
    assert [status for _, status, _, _ in reporter.finished] == ["skipped", "skipped"]
    assert store.experiment(spec.name).status == "budget-exhausted"
    assert store.spent(spec.name) == pytest.approx(1.0 - per_candidate / 2)  # nothing deployed, nothing billed
    assert not (tmp_path / "runs").exists()


def test_a_budget_skip_is_tried_again_by_the_next_run(tmp_path: Path) -> None:
    """A budget skip is not final: the next run tries the candidate again (and, the budget being still spent,
    records it skipped again)."""
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with NullEndpoint(delay_ms=1) as url:
        spec = remote_spec(url, budget=1.0)
        store.save_experiment(spec)
        store.add_spend(spec.name, 1.0)
        Job(spec, store, JobOptions(run_root=tmp_path / "runs"), Recorder()).run()
        reporter = Recorder()
        Job(spec, store, JobOptions(run_root=tmp_path / "runs"), reporter).run()
    assert [reused for *_, reused in reporter.finished] == [False, False]  # not reused: tried again
    keys = [c.key for c in expand_candidates(spec)]
    assert len({run.candidate_id for run in store.runs(spec.name)}) == len(keys)
    assert [run.status for run in store.runs(spec.name)] == ["skipped"] * 4
