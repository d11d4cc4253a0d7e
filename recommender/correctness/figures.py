"""Pure rules of the correctness gate: how far one output is from the reference's, and whether that is within tolerance.

An element passes when |served - reference| <= atol + rtol x |reference| (numpy.allclose's rule), and an output
passes when every element does and, for an output with more than one value per row (an embedding), every row's
cosine similarity with the reference row is at least min_cosine.

`Correctness` is what either gate stores with a run (a generative one's figures are tokens.py's), and `describe` the
sentence reports say of it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# Defaults per precision. fp32: a served fp32 model (libtorch, onnxruntime, OpenVINO) differs from eager PyTorch by
# reordered float sums only, ~1e-6 on L2-normalised embeddings; atol 1e-4 / rtol 1e-3 leaves two orders of margin
# and still catches any real change (perturbed weights, a wrong export: errors of 1e-2 and more). fp16 keeps ~3
# significant digits (unit roundoff 4.9e-4), accumulated over layers to ~1e-3: atol 1e-2 / rtol 1e-2, cosine 0.999.
DEFAULTS = {
    "fp32": {"atol": 1e-4, "rtol": 1e-3, "min_cosine": 0.9999},
    "fp16": {"atol": 1e-2, "rtol": 1e-2, "min_cosine": 0.999},
}


OFF_NOTE = "correctness not checked (correctness: off)"
# a generative endpoint whose model is not here (a remote one, not `source: llama`) has no reference to be judged by
GENERATION_NOTE = "not checked: generation (the generation gate needs the model here: model.source llama)"


@dataclass(frozen=True)
class Correctness:
    """What the gate found: stored per run (the figures, the tolerances, the reference's identity and version)."""

    checked: bool
    passed: bool
    reason: str | None = None
    tolerance: dict[str, Any] | None = None
    precision: str | None = None
    reference: dict[str, str] | None = None
    figures: list[dict[str, Any]] = field(default_factory=list)
    unchecked_cases: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    min_cosine: float

    def describe(self) -> str:
        return f"atol {self.atol:g}, rtol {self.rtol:g}, cosine >= {self.min_cosine:g}"


@dataclass(frozen=True)
class OutputFigures:
    """How one output of one input compares with the reference's."""

    case: str
    output: str
    max_abs_error: float
    max_rel_error: float
    min_cosine: float | None  # the lowest per-row cosine; None for one value per row
    worst_excess: float  # max of |served - reference| - (atol + rtol x |reference|): > 0 means out of tolerance
    worst: tuple[float, float] | None = None  # (served, reference) of the element with that worst excess

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_tolerance(precision: str) -> Tolerance:
    """The documented defaults for a precision (fp32 for any precision without its own)."""
    return Tolerance(**DEFAULTS.get(precision, DEFAULTS["fp32"]))


def tolerance_of(given: dict[str, float | None], precision: str) -> Tolerance:
    """The experiment's tolerances, each one not given taken from the precision's default."""
    default = asdict(default_tolerance(precision))
    return Tolerance(
        **{name: default[name] if (value := given.get(name)) is None else float(value) for name in default}
    )


def compare(
    case: str,
    output: str,
    served: Sequence[Sequence[float]],
    reference: Sequence[Sequence[float]],
    tolerance: Tolerance,
) -> OutputFigures:
    """The figures of one output ([rows][values]) against the reference; ValueError when the shapes differ."""
    if len(served) != len(reference) or any(len(s) != len(r) for s, r in zip(served, reference, strict=False)):
        raise ValueError(
            f"output {output} for input {case}: shape {_shape(served)} differs from the reference's {_shape(reference)}"
        )
    pairs = [
        (s, r) for s_row, r_row in zip(served, reference, strict=False) for s, r in zip(s_row, r_row, strict=False)
    ]
    errors = [abs(s - r) if math.isfinite(s) else math.inf for s, r in pairs]
    rel = [e / abs(r) if r else (0.0 if e == 0 else math.inf) for e, (_, r) in zip(errors, pairs, strict=False)]
    excess = [e - (tolerance.atol + tolerance.rtol * abs(r)) for e, (_, r) in zip(errors, pairs, strict=False)]
    cosines = (
        [cosine(s, r) for s, r in zip(served, reference, strict=False)] if reference and len(reference[0]) > 1 else []
    )
    worst = max(range(len(excess)), key=excess.__getitem__, default=None)
    return OutputFigures(
        case,
        output,
        max(errors, default=0.0),
        max(rel, default=0.0),
        min(cosines) if cosines else None,
        max(excess, default=-math.inf),
        None if worst is None else pairs[worst],
    )


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two vectors; 1.0 for two zero vectors, 0.0 when only one is zero, 0.0 for non-finite
    values."""
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    if not math.isfinite(dot) or not math.isfinite(norm):
        return 0.0
    if norm == 0:
        return 1.0 if not any(a) and not any(b) else 0.0
    return dot / norm


def violations(figures: OutputFigures, tolerance: Tolerance) -> list[str]:
    """Why this output is out of tolerance, in plain words; empty when it is within."""
    where = f"on output {figures.output} for input {figures.case}"
    found = []
    if figures.worst_excess > 0:
        found.append(_out_of_tolerance(figures, tolerance, where))
    if figures.min_cosine is not None and figures.min_cosine < tolerance.min_cosine:
        found.append(f"cosine {figures.min_cosine:.6g} < min_cosine {tolerance.min_cosine:g} {where}")
    return found


def _out_of_tolerance(figures: OutputFigures, tolerance: Tolerance, where: str) -> str:
    """The failing element's own figures (the one furthest past atol + rtol x |reference|): the largest absolute
    error may belong to an element whose larger reference allows it."""
    bound = f"atol {tolerance.atol:g} + rtol {tolerance.rtol:g} x |reference|"
    if figures.worst is None:
        return f"max abs error {figures.max_abs_error:.3g} > {bound} {where}"
    served, reference = figures.worst
    error = abs(served - reference) if math.isfinite(served) else math.inf
    element = f"served {served:.6g} vs reference {reference:.6g}"
    allowed = f"{tolerance.atol + tolerance.rtol * abs(reference):.3g}"
    if error >= figures.max_abs_error:
        largest = f"max rel error {figures.max_rel_error:.3g}"
        return f"max abs error {error:.3g} > {bound} = {allowed} ({element}; {largest}) {where}"
    return (
        f"abs error {error:.3g} > {bound} = {allowed} ({element}; the max abs error "
        f"{figures.max_abs_error:.3g} is within its own tolerance) {where}"
    )


def verdict(all_figures: list[OutputFigures], tolerance: Tolerance) -> str | None:
    """The reason the variant is incorrect (the first violations, with how many more), or None when every output is
    within."""
    found = [text for f in all_figures for text in violations(f, tolerance)]
    if not found:
        return None
    more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
    return "; ".join(found[:2]) + more


def _shape(rows: Sequence[Sequence[float]]) -> list[int]:
    return [len(rows), len(rows[0]) if rows else 0]


def describe(stored: dict[str, Any] | None) -> str:
    """One sentence on a run's stored correctness, for reports: what was checked, against what, within what."""
    if not stored:
        return "correctness not checked (run measured before the gate existed)"
    if not stored.get("checked"):
        return stored.get("reason") or OFF_NOTE
    t, ref = stored["tolerance"], stored.get("reference") or {}
    version = f", {ref['library']} {ref['version']}" if ref.get("library") else ""
    if "generated_tokens" in t:  # a generative run's: greedy tokens (tokens.py)
        return _describe_tokens(stored, t, f"{ref.get('kind')}{version}")
    within = f"atol {t['atol']:g}, rtol {t['rtol']:g}, cosine >= {t['min_cosine']:g}"
    if not stored.get("passed"):
        return f"outputs differ from the reference ({ref.get('kind')}{version}): {stored.get('reason')}"
    checked = len(stored.get("figures", []))
    return f"outputs match the reference ({ref.get('kind')}{version}) within {within} on {checked} outputs checked"


def _describe_tokens(stored: dict[str, Any], t: dict[str, Any], reference: str) -> str:
    precision = stored.get("precision") or "fp32"
    if not stored.get("passed"):
        return f"greedy tokens differ from the reference ({reference}) at {precision}: {stored.get('reason')}"
    within = (
        "exactly"
        if t["min_agreement"] >= 1
        else f"within token agreement >= {t['min_agreement']:g}, logprob error <= {t['logprob_atol']:g}"
    )
    prompts = len(stored.get("figures", []))
    return (
        f"greedy tokens match the reference ({reference}) {within} at {precision}, "
        f"{t['generated_tokens']} tokens of {prompts} prompts"
    )
