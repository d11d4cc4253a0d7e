"""The run's progress bar counts candidates: a probe followed by its prune is one candidate, not two."""

from __future__ import annotations

import io

from rich.console import Console

from recommender.candidates import Candidate
from recommender.cli.progress import ProgressReporter


def test_a_pruned_candidate_counts_once_on_the_overall_bar() -> None:
    out = io.StringIO()
    reporter = ProgressReporter(Console(file=out, width=200))
    first, second = Candidate("pt", None, 1, 8, "local-cpu"), Candidate("pt", None, 2, 8, "local-cpu")
    with reporter:
        reporter.candidate_started(first, 0, 2, 10)
        reporter.candidate_finished(first, "ok", None, reused=False)  # the probe
        reporter.candidate_finished(first, "pruned", "pruned by racing: below the leader", reused=False)
        assert reporter.progress.tasks[0].completed == 1
        reporter.candidate_started(second, 1, 2, 10)
        reporter.candidate_finished(second, "ok", None, reused=False)
        assert reporter.progress.tasks[0].completed == 2
    assert "pruned pt-nodb-ig1-mbs8: pruned by racing: below the leader" in out.getvalue()


def test_a_prune_of_another_candidate_does_not_land_on_the_bar_of_the_one_measured_last() -> None:
    """Adaptive search: the full measurement of the best probe runs, then the other probes are pruned; the measured
    candidate's bar keeps its own status."""
    reporter = ProgressReporter(Console(file=io.StringIO(), width=200))
    best, other = Candidate("pt", None, 2, 8, "local-cpu"), Candidate("pt", None, 1, 8, "local-cpu")
    with reporter:
        reporter.candidate_started(best, 1, 2, 10)
        reporter.candidate_finished(best, "ok", None, reused=False)
        reporter.candidate_finished(other, "pruned", "pruned by racing: could at most tie", reused=False)
        bar = reporter.progress.tasks[-1]
        assert bar.description == "  pt-nodb-ig2-mbs8" and bar.fields["detail"] == "ok"
