"""Verdicts at decision time: stored results decided again under the limits of the decision being taken.

    results + each run's window records + Limits (+ the measurement's window rules)  ->  results with their
    headlines (verdict, MaxInvocations, ModelLatency, intervals, stability) and server figures at the level shown,
    recomputed once by metrics/levels.decide

Pure: the caller hands over the window records (review.py reads them from the store). A run stored without
windows (schema before 0002, or an imported job) keeps the figures it was stored with.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from recommender.candidates import CandidateResult, RunStatus
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits
from recommender.metrics.rules import Rules
from recommender.spec import ExperimentSpec


def decide_result(
    result: CandidateResult, records: list[WindowRecord], rules: Rules, limits: Limits | None = None
) -> CandidateResult:
    """One result decided under `limits` (default: the rules' own) with the measurement's window rules (unchanged
    when it has no headline or no windows)."""
    if result.status != RunStatus.OK or result.headline is None or not records:
        return result
    decision = decide(records, result.headline.measured, limits or rules.limits, rules.windows)
    return dataclasses.replace(
        result, headline=decision.headline, server_stats=decision.server_stats(result.server_stats)
    )


def decide_results(
    results: list[CandidateResult],
    windows_of: Callable[[int], list[WindowRecord]],
    spec: ExperimentSpec,
    limits: Limits | None = None,
) -> list[CandidateResult]:
    """Every result decided under `limits` (default: the spec's) with the spec's window rules; `windows_of(run_id)`
    gives a finished ok run's window records."""
    rules = Rules.from_spec(spec)
    return [_decided(r, windows_of, rules, limits) for r in results]


def _decided(
    result: CandidateResult, windows_of: Callable[[int], list[WindowRecord]], rules: Rules, limits: Limits | None
) -> CandidateResult:
    """A finished ok run with a headline decided on its windows (the only kind that can be); any other as it is."""
    if result.status != RunStatus.OK or result.headline is None or result.run_id is None:
        return result
    return decide_result(result, windows_of(result.run_id), rules, limits)
