"""The gate: send the check cases to a deployed endpoint (the probe path every target has) and judge the answers.

check_outputs(deployment, spec, max_batch_size, precision) -> Correctness (stored with the run)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from recommender.correctness.cases import Case, check_cases
from recommender.correctness.figures import OFF_NOTE, OutputFigures, Tolerance, compare, tolerance_of, verdict
from recommender.correctness.reference import reference_for
from recommender.errors import RecommenderError, TargetError
from recommender.spec import ExperimentSpec


class Incorrect(RecommenderError):
    """A candidate's outputs are outside tolerance: recorded `incorrect` with the figures, not loaded, never ranked."""

    def __init__(self, correctness: Correctness) -> None:
        super().__init__(correctness.reason or "outputs differ from the reference")
        self.correctness = correctness


class Endpoint(Protocol):
    def probe(self, body: dict, timeout_s: float = 120.0) -> dict: ...


@dataclass(frozen=True)
class Correctness:
    """What the gate found: stored per run (the figures, the tolerances, the reference's identity and version)."""

    checked: bool
    passed: bool
    reason: str | None = None
    tolerance: dict[str, float] | None = None
    precision: str | None = None
    reference: dict[str, str] | None = None
    figures: list[dict[str, Any]] = field(default_factory=list)
    unchecked_cases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def check_outputs(
    endpoint: Endpoint, spec: ExperimentSpec, max_batch_size: int, precision: str = "fp32"
) -> Correctness:
    """Every check case through the endpoint, compared with the reference; `passed` False with the reason when out of
    tolerance."""
    if spec.correctness == "off":
        return Correctness(checked=False, passed=True, reason=OFF_NOTE)
    tolerance = tolerance_of(spec.correctness.model_dump(), precision)
    reference = reference_for(spec.model, spec.correctness.reference_outputs)
    figures, unchecked = [], []
    for case in check_cases(spec.payload, max_batch_size):
        expected = reference.outputs(case)
        if expected is None:
            unchecked.append(case.name)
            continue
        figures += _case_figures(endpoint, case, expected, tolerance)
    reason = (
        verdict(figures, tolerance)
        if figures
        else "no check case has reference outputs (see correctness.reference_outputs)"
    )
    return Correctness(
        True,
        reason is None,
        reason,
        asdict(tolerance),
        precision,
        reference.identity,
        [f.to_dict() for f in figures],
        unchecked,
    )


def gate_settings(spec: ExperimentSpec, precision: str = "fp32") -> dict[str, float] | None:
    """The tolerances a run is judged with now (None: gate off); a stored run judged otherwise is measured again."""
    return None if spec.correctness == "off" else asdict(tolerance_of(spec.correctness.model_dump(), precision))


def judged_alike(stored: dict[str, Any] | None, spec: ExperimentSpec, precision: str = "fp32") -> bool:
    """Whether a stored run's gate (off, or its tolerances) is the one the experiment asks for now."""
    was = stored.get("tolerance") if stored and stored.get("checked") else None
    return was == gate_settings(spec, precision)


def precision_of(config: dict[str, Any]) -> str:
    """A candidate's precision (fp32 unless its configuration names one)."""
    return config.get("precision") or "fp32"


def _case_figures(
    endpoint: Endpoint, case: Case, expected: dict[str, list], tolerance: Tolerance
) -> list[OutputFigures]:
    served = served_outputs(endpoint.probe(case.body()))
    figures = []
    for name, rows in expected.items():
        if name not in served:
            raise TargetError(
                f"the endpoint's answer for input {case.name} has no output {name!r} (it has {sorted(served)})"
            )
        try:
            figures.append(compare(case.name, name, served[name], rows, tolerance))
        except ValueError as exc:  # a shape that differs is incorrect, with infinite error
            figures.append(OutputFigures(case.name, f"{name} ({exc})", math.inf, math.inf, 0.0, math.inf))
    return figures


def served_outputs(answer: dict) -> dict[str, list[list[float]]]:
    """A KServe v2 JSON answer's outputs by name, each as [rows][values] (the first dimension is the batch)."""
    outputs = {}
    for output in answer.get("outputs", []):
        data, shape = [float(v) for v in output.get("data", [])], output.get("shape") or [1]
        width = math.prod(shape[1:]) if len(shape) > 1 else 1
        outputs[output["name"]] = [data[i : i + width] for i in range(0, len(data), max(width, 1))]
    return outputs
