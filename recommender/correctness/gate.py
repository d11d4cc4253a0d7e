"""The gate: send the check cases to a deployed endpoint (the probe path every target has) and judge the answers.

check_outputs(deployment, spec, max_batch_size, precision, padding) -> Correctness (stored with the run)

A generative endpoint's gate is generation_gate.py's (greedy tokens against transformers fp32 on the same weights).
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from typing import Any, Protocol

from recommender.correctness.cases import Case, check_cases, text_cases
from recommender.correctness.figures import (
    GENERATION_NOTE,
    OFF_NOTE,
    Correctness,
    OutputFigures,
    Tolerance,
    compare,
    tolerance_of,
    verdict,
)
from recommender.correctness.generation_gate import check_generation, tolerance_settings
from recommender.correctness.reference import reference_for
from recommender.correctness.tokens import engine_precision
from recommender.errors import RecommenderError, TargetError
from recommender.modelrepo.llama import served_folder
from recommender.spec import ExperimentSpec
from recommender.targets.wire import Wire, embeddings_of, openai_body


class Incorrect(RecommenderError):
    """A candidate's outputs are outside tolerance: recorded `incorrect` with the figures, not loaded, never ranked."""

    def __init__(self, correctness: Correctness) -> None:
        super().__init__(correctness.reason or "outputs differ from the reference")
        self.correctness = correctness


class Endpoint(Protocol):
    model_name: str

    @property
    def wire(self) -> Wire: ...  # KServe v2 (token ids in), or a server that tokenizes (OpenAI embeddings)

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict: ...


def check_outputs(
    endpoint: Endpoint, spec: ExperimentSpec, max_batch_size: int, precision: str = "fp32", padding: str = "max"
) -> Correctness:
    """Every check case through the endpoint (padded as the candidate's load: `padding`), compared with the
    reference; `passed` False with the reason when out of tolerance. A generative endpoint's greedy tokens are
    judged against the model's own (generation_gate.py); one whose model is not here (not `source: llama`) is not
    checked (GENERATION_NOTE)."""
    if spec.correctness == "off":
        return Correctness(checked=False, passed=True, reason=OFF_NOTE)
    if endpoint.wire.generative:
        folder = served_folder(spec.model)
        if folder is None:
            return Correctness(checked=False, passed=True, reason=GENERATION_NOTE)
        return check_generation(endpoint, spec, folder, precision)  # type: ignore[arg-type]
    tolerance = tolerance_of(spec.correctness.model_dump(), precision)
    reference = reference_for(spec.model, spec.correctness.reference_outputs)
    figures, unchecked, differences = [], [], list[str]()
    text = endpoint.wire.takes_text
    cases = text_cases(spec.payload, max_batch_size) if text else check_cases(spec.payload, max_batch_size, padding)
    for case in cases:
        expected = reference.outputs(case)
        if expected is None:
            unchecked.append(case.name)
            continue
        figures += _case_figures(endpoint, case, expected, tolerance, differences)
    reason = (
        verdict(figures, tolerance)
        if figures
        else "no check case has reference outputs (see correctness.reference_outputs)"
    )
    if reason is not None and differences:
        reason += f"; {differences[0]}"
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


def gate_settings(spec: ExperimentSpec, precision: str = "fp32", generative: bool = False) -> dict[str, Any] | None:
    """The tolerances a run is judged with now (None: gate off, or a generative endpoint whose model is not here);
    a stored run judged otherwise is measured again."""
    if spec.correctness == "off":
        return None
    if generative:
        return tolerance_settings(spec, precision) if spec.model.source == "llama" else None
    return asdict(tolerance_of(spec.correctness.model_dump(), precision))


def judged_alike(
    stored: dict[str, Any] | None, spec: ExperimentSpec, precision: str = "fp32", generative: bool = False
) -> bool:
    """Whether a stored run's gate (off, or its tolerances) is the one the experiment asks for now; an engine's
    `auto` precision is the one the stored run's engine served (generation_gate.served_precision)."""
    was = stored.get("tolerance") if stored and stored.get("checked") else None
    if precision == "auto" and stored and stored.get("precision"):
        precision = stored["precision"]
    return was == gate_settings(spec, precision, generative)


def precision_of(config: dict[str, Any]) -> str:
    """A candidate's precision: the one its configuration names; a generative engine's from its engine settings
    (`dtype`, quantisation: tokens.engine_precision); else fp32."""
    if config.get("precision"):
        return config["precision"]
    engine = json.loads(config["engine"]) if config.get("engine") else None
    return engine_precision(engine) if isinstance(engine, dict) else "fp32"


def _case_figures(
    endpoint: Endpoint, case: Case, expected: dict[str, list], tolerance: Tolerance, differences: list[str]
) -> list[OutputFigures]:
    served = _served(endpoint, case, expected)
    if endpoint.wire.takes_text:
        differences += [d for name in expected if (d := stack_difference(served[name], expected[name])) is not None]
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


def _served(endpoint: Endpoint, case: Case, expected: dict[str, list]) -> dict[str, list[list[float]]]:
    """The endpoint's outputs for a case: KServe outputs by name, or (a server that tokenizes) the embeddings of the
    case's texts, compared with the reference's one output."""
    if not endpoint.wire.takes_text:
        return served_outputs(endpoint.probe(case.body()))
    assert case.texts is not None  # text_cases gives every case its texts
    answer = endpoint.probe(openai_body(endpoint.model_name, case.texts))
    try:
        rows = embeddings_of(answer, len(case.texts))
    except ValueError as error:
        raise TargetError(f"the endpoint's answer for input {case.name}: {error}") from None
    return {name: rows for name in expected}


def stack_difference(served: list[list[float]], reference: list[list[float]]) -> str | None:
    """What a serving stack does differently, named where the rows tell: another width, no L2 normalization (norms
    apart, directions alike), or other pooling (directions apart); None when the rows agree in norm and direction."""
    if not served or not reference or len(served[0]) != len(reference[0]):
        width = len(served[0]) if served else 0
        return f"the stack returns {width}-dimensional rows, the reference {len(reference[0]) if reference else 0}"
    norm = lambda row: math.sqrt(sum(x * x for x in row))
    cosine = min(
        sum(a * b for a, b in zip(s, r, strict=True)) / (norm(s) * norm(r) or 1.0)
        for s, r in zip(served, reference, strict=False)
    )
    norms = [norm(row) for row in served], [norm(row) for row in reference]
    apart = max(abs(a - b) / (b or 1.0) for a, b in zip(*norms, strict=False))
    if cosine < 0.99:
        return f"rows point elsewhere (lowest cosine {cosine:.3f}): the stack pools or tokenizes differently"
    if apart > 0.01:
        return f"row norms {norms[0][0]:.3f} vs the reference's {norms[1][0]:.3f}: the stack normalizes differently"
    return None


def served_outputs(answer: dict) -> dict[str, list[list[float]]]:
    """A KServe v2 JSON answer's outputs by name, each as [rows][values] (the first dimension is the batch)."""
    outputs = {}
    for output in answer.get("outputs", []):
        data, shape = [float(v) for v in output.get("data", [])], output.get("shape") or [1]
        width = math.prod(shape[1:]) if len(shape) > 1 else 1
        outputs[output["name"]] = [data[i : i + width] for i in range(0, len(data), max(width, 1))]
    return outputs
