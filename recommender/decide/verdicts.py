"""Verdicts at decision time: stored results decided again under the limits of the decision being taken.

    results + each run's window records + spec (threshold, percentile, error limit)  ->  results with their
    headlines (verdict, MaxInvocations, ModelLatency, intervals, stability) recomputed by metrics/levels.py

Pure: the caller hands over the window records (review.py reads them from the store). A run stored without
windows (schema before 0002, or an imported job) keeps the figures it was stored with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from recommender.candidates import CandidateResult, RunStatus
from recommender.metrics.levels import WindowRecord, decide_headline, decide_levels
from recommender.metrics.steady import Rules
from recommender.spec import ExperimentSpec, LatencyThreshold


def decide_result(result: CandidateResult, records: list[WindowRecord], rules: Rules) -> CandidateResult:
    """One result decided under `rules` (unchanged when it has no headline or no windows)."""
    if result.status != RunStatus.OK or result.headline is None or not records:
        return result
    headline = decide_headline(result.headline, records, rules)
    level = decide_levels(records, headline.repeats, rules).shown
    server = dict(result.server_stats or {}) | {"at_max_invocations": level.server() if level else {}}
    return dataclasses.replace(result, headline=headline, server_stats=server)


def decide_results(
    results: list[CandidateResult], windows_of: Callable[[int], list[WindowRecord]], spec: ExperimentSpec
) -> list[CandidateResult]:
    """Every result decided under the spec's limits; `windows_of(run_id)` gives a finished ok run's window records."""
    rules = Rules.from_spec(spec)
    return [decide_result(r, windows_of(r.run_id), rules) if _decidable(r) else r for r in results]


def _decidable(result: CandidateResult) -> bool:
    """A finished ok run with a headline: the only kind whose windows can be decided on."""
    return result.status == RunStatus.OK and result.headline is not None and result.run_id is not None


def with_limits(
    spec: ExperimentSpec,
    threshold_ms: float | None = None,
    percentile: str | None = None,
    max_error_rate: float | None = None,
) -> ExperimentSpec:
    """The spec with the decision's limits replaced where given (validated as the experiment file would be)."""
    threshold = spec.latency_threshold
    update = {
        "latency_threshold": LatencyThreshold(
            percentile=percentile or threshold.percentile, ms=threshold.ms if threshold_ms is None else threshold_ms
        )
    }
    document = spec.model_dump(mode="json") | {k: v.model_dump() for k, v in update.items()}
    if max_error_rate is not None:
        document["max_error_rate"] = max_error_rate
    return ExperimentSpec.model_validate(document)
