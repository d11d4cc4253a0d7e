"""The candidate run's failure-to-status map and the run ledger's plain records."""

from pathlib import Path

import pytest

from recommender.candidates import RunStatus, expand_candidates
from recommender.decide.budget import BudgetExceeded
from recommender.errors import CandidateSkipped, Interrupted, RecommenderError
from recommender.job.candidate_run import ERROR_STATUSES, outcome_of
from recommender.metrics.headline import Headline
from recommender.spec import ExperimentSpec
from recommender.store.ledger import RunLedger, StoredRun
from recommender.store.results import ResultStore


@pytest.mark.parametrize(
    ("error", "status", "budget_skipped"),
    [
        (CandidateSkipped("TensorRT needs an NVIDIA GPU"), RunStatus.SKIPPED, False),
        (BudgetExceeded("$2.00 of the $1.00 budget spent"), RunStatus.INTERRUPTED, True),
        (RecommenderError("the server died"), RunStatus.FAILED, False),
        (Interrupted(15), RunStatus.INTERRUPTED, False),
        (OSError("disk full"), RunStatus.FAILED, False),
        (ValueError("a bug"), RunStatus.FAILED, False),
    ],
)
def test_each_failure_becomes_the_first_matching_status(tmp_path: Path, error, status, budget_skipped) -> None:
    outcome = outcome_of(error, tmp_path)
    assert (outcome.status, outcome.budget_skipped) == (status, budget_skipped)
    assert outcome.reason


def test_what_the_job_does_not_record_is_not_mapped(tmp_path: Path) -> None:
    assert outcome_of(SystemExit(1), tmp_path) is None
    assert ERROR_STATUSES[-1][0] is Exception  # the catch-all comes last


def test_the_ledger_promotes_a_probe_and_reads_back_plain_records(tmp_path: Path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    spec = ExperimentSpec.model_validate({"name": "ledger"})
    candidate_id = store.save_candidate(store.save_experiment(spec), expand_candidates(spec)[0])
    ledger = RunLedger(store)
    probe = ledger.start(candidate_id, "p", tmp_path / "run", None, "python:torchscript")
    final = ledger.promote(probe, {}, "in the race", tmp_path / "run" / "final")
    assert (final.run_id != probe.run_id, final.backend, final.run_dir) == (
        True,
        "python:torchscript",
        tmp_path / "run" / "final",
    )
    ledger.finish(final, RunStatus.SKIPPED, "budget: out", budget_skipped=True)
    assert ledger.final(candidate_id, "p") is None  # a budget skip is measured again
    ledger.finish(ledger.start(candidate_id, "p", tmp_path / "again", None, None), RunStatus.SKIPPED, "no GPU")
    assert ledger.final(candidate_id, "p") == StoredRun(
        final.run_id + 1, RunStatus.SKIPPED, "no GPU", 1, None, False, measured=False
    )


def test_a_candidate_pruned_before_any_probe_is_final_but_not_measured(tmp_path: Path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    spec = ExperimentSpec.model_validate({"name": "ledger", "variants": {"instance_group_counts": [1, 2]}})
    experiment = store.save_experiment(spec)
    first, second = (store.save_candidate(experiment, c) for c in expand_candidates(spec)[:2])
    ledger = RunLedger(store)
    ledger.prune(first, "p", "pruned by the grid's structure, not probed: ...")
    assert (ledger.final(first, "p").status, ledger.final(first, "p").measured) == (RunStatus.PRUNED, False)
    probe = ledger.start(second, "p", tmp_path / "run", None, None)
    ledger.finish(probe, RunStatus.OK, fields={"headline": Headline(max_invocations=100.0, repeats=1)})
    ledger.prune(second, "p", "pruned by racing: ...")
    assert (ledger.final(second, "p").status, ledger.final(second, "p").measured) == (RunStatus.PRUNED, True)


def test_a_stored_run_known_before_its_last_repeat_is_complete(tmp_path: Path) -> None:
    """A grid run with `traffic.repeats: 5` known at 3 ended by its stopping rule: reused on resume, not measured
    again (by the repeat count it was measured again on every resume); one stored with 3 of at most 3 is not complete
    for work asking for 5, nor a probe for a final."""
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    spec = ExperimentSpec.model_validate({"name": "ledger", "variants": {"instance_group_counts": [1, 2, 3]}})
    experiment = store.save_experiment(spec)
    known, capped, probed = (store.save_candidate(experiment, c) for c in expand_candidates(spec)[:3])
    ledger = RunLedger(store)
    for candidate_id, repeats, most in ((known, 3, 5), (capped, 3, 3), (probed, 1, 1)):
        run = ledger.start(candidate_id, "p", tmp_path / str(candidate_id), None, None)
        headline = Headline(max_invocations=100.0, repeats=repeats, most_repeats=most)
        ledger.finish(run, RunStatus.OK, fields={"headline": headline})
    assert [ledger.final(c, "p").complete(5) for c in (known, capped, probed)] == [True, False, False]
    assert ledger.final(probed, "p").complete(1)


def test_a_row_stored_before_the_cap_was_kept_is_complete_by_its_repeats() -> None:
    old = Headline.from_dict({"repeats": 3, "max_invocations": 100.0})
    assert (old.most_repeats, old.complete(3), old.complete(5)) == (None, True, False)
