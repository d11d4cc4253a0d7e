"""Review: an experiment read back from the store and decided on (the recommendation, its spec, its results).

The one place where stored results meet the decision code: the CLI (run, rank, report, export) and the dashboard
call `decided_from_store` / `recommend_from_store`; decide/ itself never imports the store. Reads never mix
measurement protocols: they take the experiment's current one (its newest run's); older runs are history.
Verdicts are taken at read time, under the limits given (one `Limits`: by default the stored experiment file's, with
the CLI's or the dashboard's values in place), once per run (metrics/levels.decide).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from typing import Any

from pydantic import ValidationError

from recommender.candidates import CandidateResult
from recommender.decide.prices import Catalog
from recommender.decide.recommendation import Recommendation, recommend
from recommender.decide.verdicts import decide_results
from recommender.errors import StoreError
from recommender.metrics.levels import WindowRecord
from recommender.metrics.limits import Limits
from recommender.spec import ExperimentSpec, LatencyThreshold
from recommender.store.results import ResultStore


def recommend_from_store(
    store: ResultStore,
    experiment: str,
    catalogs: Iterable[Catalog] | None = None,
    endpoint_name: str | None = None,
    threshold_ms: float | None = None,
    percentile: str | None = None,
    max_error_rate: float | None = None,
) -> tuple[Recommendation, ExperimentSpec, list[CandidateResult]]:
    """Read an experiment's spec and results from the store, decide under the experiment file's limits with the given
    ones in place and recommend; StoreError for an unknown experiment, SpecError for a bad limit. Nothing is measured:
    the verdicts are recomputed from the stored windows. The spec returned states the limits decided under."""
    info = store.experiment(experiment)
    spec = stored_spec(info.name, info.spec)
    limits = Limits.from_spec(spec).override(threshold_ms, percentile, max_error_rate)
    return recommend_decided(store, experiment, spec, limits, catalogs=catalogs, endpoint_name=endpoint_name)


def recommend_decided(
    store: ResultStore,
    experiment: str,
    spec: ExperimentSpec,
    limits: Limits,
    windows_of: Callable[[int], list[WindowRecord]] | None = None,
    catalogs: Iterable[Catalog] | None = None,
    endpoint_name: str | None = None,
) -> tuple[Recommendation, ExperimentSpec, list[CandidateResult]]:
    """The stored results decided under `limits` and the recommendation they give under `spec` (objectives,
    capacity, target) with those limits."""
    results = decided_from_store(store, experiment, spec, windows_of=windows_of, limits=limits)
    decided = with_limits(spec, limits)
    return recommend(results, decided, catalogs, endpoint_name), decided, results


def decided_from_store(
    store: ResultStore,
    experiment: str,
    spec: ExperimentSpec,
    protocol_key: str | Collection[str] | None = None,
    windows_of: Callable[[int], list[WindowRecord]] | None = None,
    limits: Limits | None = None,
) -> list[CandidateResult]:
    """The experiment's results under one protocol per target (default: each target's current one), decided under
    `limits` (default: the spec's) with the spec's window rules;
    `windows_of` reads a run's window records (default: from the store; the dashboard passes a cached reader)."""
    results = store.results(experiment, protocol_key or store.current_protocols(experiment) or "")
    return decide_results(results, windows_of or store.window_records, spec, limits)


def with_limits(spec: ExperimentSpec, limits: Limits) -> ExperimentSpec:
    """The spec stating the decision's limits (what the recommendation and its report say they were decided under);
    `limits` are checked already (Limits.override), so the spec is not validated again."""
    if Limits.from_spec(spec) == limits:
        return spec
    threshold = LatencyThreshold.model_validate({"percentile": limits.percentile, "ms": limits.threshold_ms})
    return spec.model_copy(update={"latency_threshold": threshold, "max_error_rate": limits.max_error_rate})


def stored_spec(name: str, document: dict[str, Any]) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(document)
    except ValidationError as exc:
        raise StoreError(
            f"the stored experiment file of {name!r} no longer validates: {exc.errors()[0]['msg']}",
            hint="run the experiment again with `recommender run FILE` to store it under the current schema",
        ) from exc
