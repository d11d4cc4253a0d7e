"""Review: an experiment read back from the store and decided on (the recommendation, its spec, its results).

The one place where stored results meet the decision code: the CLI (rank, report, export) and the dashboard call
`recommend_from_store`; decide/ itself never imports the store.
"""

from __future__ import annotations

from typing import Any, Iterable

from pydantic import ValidationError

from recommender.candidates import CandidateResult
from recommender.decide.prices import Catalog
from recommender.decide.recommendation import Recommendation, recommend
from recommender.errors import StoreError
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore


def recommend_from_store(store: ResultStore, experiment: str, catalogs: Iterable[Catalog] | None = None,
                         endpoint_name: str | None = None) -> tuple[Recommendation, ExperimentSpec, list[CandidateResult]]:
    """Read an experiment's spec and results from the store and recommend; StoreError for an unknown experiment."""
    info = store.experiment(experiment)
    spec = stored_spec(info.name, info.spec)
    results = store.results(experiment)
    return recommend(results, spec, catalogs, endpoint_name), spec, results


def stored_spec(name: str, document: dict[str, Any]) -> ExperimentSpec:
    try:
        return ExperimentSpec.model_validate(document)
    except ValidationError as exc:
        raise StoreError(f"the stored experiment file of {name!r} no longer validates: {exc.errors()[0]['msg']}",
                         hint="run the experiment again with `recommender run FILE` to store it under the current schema") from exc
