"""Pure rules of the generation gate (docs/design.md "Correctness"): greedy tokens against the reference's.

Per gate prompt the reference gives its first N greedy tokens, the log-probability of each and its margin (its top
token's log-probability minus the second's). The candidate gives its own N greedy tokens (free-running, temperature
0) and, where the server returns prompt logprobs, teacher-forced figures: with the reference continuation sent back
as the prompt, the log-probability it gives each reference token and its own top token at each position.

- fp32 must match exactly: the free-running tokens equal the reference's at every position.
- Lower precision (bf16, fp16, vLLM's `auto` 16-bit type, quantised weights) is judged by token agreement (the
  share of positions whose reference token is the candidate's top token given the reference prefix, teacher
  forced; free-running where the server gives no logprobs) and by the largest |candidate logprob - reference
  logprob| of the reference tokens. A disagreement where the reference's own margin is a near-tie that the
  precision may flip is counted as agreeing (and counted as a tie): teacher forced, a margin within twice the
  logprob error measured at that position (and within the precision's logprob tolerance); free-running, a margin
  within the logprob tolerance, and the positions after that divergence follow another prefix and are not judged.
  Where every margin is within a loose row's tolerance (random weights at q4), only the logprob error can refuse.
- A candidate below its precision's agreement, or above its logprob tolerance, is incorrect; the reason names the
  first diverging position of its free-running output and both tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from recommender.spec.llamacpp import LlamaCppSettings


@dataclass(frozen=True)
class TokenTolerance:
    """What a precision may change: the least token agreement, the largest logprob error of a reference token."""

    min_agreement: float
    logprob_atol: float


# One table, per precision. Measured here on the built random-weight Llama (hidden 128 and 256; transformers fp32
# against the same weights in bf16 and fp16, 16 greedy tokens of 3 prompts): bf16 changed a reference token's
# logprob by at most 0.008 and fp16 by at most 0.0011; vLLM 0.32.0 on the CPU served fp32 exactly (logprob error
# 1e-6) and bf16 within 0.0042. Each bound leaves a margin of about 5x to 10x; a real change (weights with noise of
# their own scale added) moved logprobs by 1.1 to 1.6. Random weights put near-ties everywhere (top-2 margins down to
# 3e-4): a flip there is a tie, not a change. q8 and q4 (quantised weights, e.g. GGUF) are not calibrated here yet:
# stated as estimates, loosest last.
TOKEN_TOLERANCES: dict[str, TokenTolerance] = {
    "fp32": TokenTolerance(min_agreement=1.0, logprob_atol=1e-3),
    "fp16": TokenTolerance(min_agreement=0.9, logprob_atol=0.01),
    "bf16": TokenTolerance(min_agreement=0.9, logprob_atol=0.05),
    "auto": TokenTolerance(min_agreement=0.9, logprob_atol=0.05),  # vLLM downcasts a float32 model to bf16 or fp16
    "q8": TokenTolerance(min_agreement=0.8, logprob_atol=0.2),
    "q4": TokenTolerance(min_agreement=0.6, logprob_atol=0.5),
}
_DTYPES = {  # vLLM's --dtype values (and the short names) -> a row of the table
    "float32": "fp32",
    "float": "fp32",
    "fp32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "fp16": "fp16",
    "bfloat16": "bf16",
    "bf16": "bf16",
    "auto": "auto",
}
_EIGHT_BIT = ("q8", "int8", "fp8", "w8")
_GGUF_FLOATS = {"f32": "fp32", "f16": "fp16", "bf16": "bf16"}  # llama.cpp's unquantised GGUF types


def engine_precision(engine: Mapping[str, Any]) -> str:
    """The precision a generative candidate serves at, from its engine configuration: a llama.cpp candidate's, the
    loosest of the tensor types it computes in (`LlamaCppSettings.computed_types`: its weights', KV cache's and
    attention's; llama-server's own cache and CPU flash attention are 16-bit), else quantised weights (a
    `quantization` or GGUF `quant` setting: q8 for 8-bit names, else q4, the loosest row), else its `dtype` (absent:
    `auto`, the engine's own choice; vLLM downcasts a float32 model to a 16-bit type)."""
    if engine.get("gguf_type"):
        types = LlamaCppSettings.from_engine(engine).computed_types()
        return max((_gguf_precision(str(t).lower()) for t in types), key=lambda row: TOKEN_TOLERANCES[row].logprob_atol)
    return _weights_precision(engine)


def _gguf_precision(gguf_type: str) -> str:
    """A llama.cpp tensor type's row: f32, f16 and bf16 as they are, any other a quantised one."""
    return _GGUF_FLOATS.get(gguf_type) or _weights_precision({"quant": gguf_type})


def _weights_precision(engine: Mapping[str, Any]) -> str:
    """A quantisation setting's row (q8 for 8-bit names, else q4), else the dtype's (absent: `auto`)."""
    quant = engine.get("quantization") or engine.get("quant")
    if quant:
        return "q8" if any(mark in str(quant).lower() for mark in _EIGHT_BIT) else "q4"
    dtype = str(engine.get("dtype") or "auto").lower()
    return _DTYPES.get(dtype, "auto")


def token_tolerance(precision: str) -> TokenTolerance:
    """The table's row for a precision (an unknown one is judged as `auto`)."""
    return TOKEN_TOLERANCES.get(precision, TOKEN_TOLERANCES["auto"])


@dataclass(frozen=True)
class Continuation:
    """The reference's greedy continuation of one prompt: its tokens, each one's logprob and its top-2 margin."""

    tokens: list[int]
    logprobs: list[float]
    margins: list[float]


@dataclass(frozen=True)
class TeacherForced:
    """The candidate given the reference continuation as its prompt: per position, the logprob it gives the
    reference token and its own top token."""

    logprobs: list[float]
    top: list[int]


@dataclass(frozen=True)
class TokenFigures:
    """How one prompt's served tokens compare with the reference's (stored with the run)."""

    case: str
    tokens: int  # positions compared (the reference's N)
    agreement: float
    teacher_forced: bool
    max_logprob_error: float | None  # None: the server returned no logprobs
    ties: int  # positions counted as agreeing because the reference's own margin was within tolerance
    first_divergence: dict[str, Any] | None  # the free-running output's: position, both tokens (decoded), the margin
    token_ids: str = "served"  # "served": the server's token ids; "re-tokenized": its text tokenized here

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def judge(
    case: str,
    reference: Continuation,
    served: Sequence[int],
    forced: TeacherForced | None,
    tolerance: TokenTolerance,
    decode: Callable[[int], str],
    token_ids: str = "served",
) -> TokenFigures:
    """The figures of one prompt. Exact (min_agreement 1): the share of free-running positions equal (a missing
    position is unequal). Otherwise: teacher-forced agreement when `forced`, else free-running up to the first
    divergence, with near-ties agreeing (the reference's margin within what the measured error could flip)."""
    n = len(reference.tokens)
    divergence = first_divergence(reference, served)
    error_at = lambda i: abs(forced.logprobs[i] - reference.logprobs[i]) if forced is not None else math.inf
    tie = lambda i: reference.margins[i] <= min(tolerance.logprob_atol, 2 * error_at(i))
    if tolerance.min_agreement >= 1:
        agreeing, ties = sum(1 for i in range(n) if i < len(served) and served[i] == reference.tokens[i]), 0
    elif forced is not None:
        misses = [i for i in range(n) if forced.top[i] != reference.tokens[i]]
        ties = sum(1 for i in misses if tie(i))
        agreeing = n - len(misses) + ties
    elif divergence is not None and divergence < len(served) and tie(divergence):
        agreeing, ties = n, 1  # the rest follows another prefix: not judged
    else:
        agreeing, ties = (n if divergence is None else divergence), 0
    error = None
    if forced is not None:
        error = max((abs(c - r) for c, r in zip(forced.logprobs, reference.logprobs, strict=True)), default=0.0)
    return TokenFigures(
        case,
        n,
        agreeing / n if n else 1.0,
        forced is not None,
        error,
        ties,
        _divergence(divergence, reference, served, decode),
        token_ids,
    )


def first_divergence(reference: Continuation, served: Sequence[int]) -> int | None:
    """The first position where the served tokens differ from the reference's (a missing one differs); None when
    they are equal throughout."""
    for i, token in enumerate(reference.tokens):
        if i >= len(served) or served[i] != token:
            return i
    return None


def _divergence(
    position: int | None, reference: Continuation, served: Sequence[int], decode: Callable[[int], str]
) -> dict[str, Any] | None:
    if position is None:
        return None
    mine = served[position] if position < len(served) else None
    return {
        "position": position,
        "served": decode(mine) if mine is not None else "(no token: the answer ended)",
        "reference": decode(reference.tokens[position]),
        "served_id": mine,
        "reference_id": reference.tokens[position],
        "reference_margin": reference.margins[position],
    }


def violations(figures: TokenFigures, tolerance: TokenTolerance, precision: str) -> list[str]:
    """Why this prompt's answer is out of tolerance, in plain words; empty when it is within."""
    found = []
    if figures.agreement < tolerance.min_agreement:
        kind = "teacher-forced" if figures.teacher_forced and tolerance.min_agreement < 1 else "greedy"
        found.append(f"{kind} token agreement {figures.agreement:.3g} < {tolerance.min_agreement:g} ({precision})")
    error = figures.max_logprob_error
    if error is not None and not (math.isfinite(error) and error <= tolerance.logprob_atol):
        found.append(f"logprob error of the reference tokens {error:.3g} > {tolerance.logprob_atol:g} ({precision})")
    if not found:
        return []
    where = f"on {figures.case}"
    return [f"{'; '.join(found)} {where}{divergence_words(figures.first_divergence)}"]


def divergence_words(divergence: dict[str, Any] | None) -> str:
    """`: first diverging at token 3, served 'foo' vs reference 'bar'` (empty when none diverged)."""
    if divergence is None:
        return ""
    return (
        f": first diverging at token {divergence['position']}, served {divergence['served']!r} vs reference "
        f"{divergence['reference']!r}"
    )


def verdict(all_figures: list[TokenFigures], tolerance: TokenTolerance, precision: str) -> str | None:
    """The reason the candidate is incorrect (the first violations, with how many more), or None when within."""
    found = [text for f in all_figures for text in violations(f, tolerance, precision)]
    if not found:
        return None
    more = f" (and {len(found) - 2} more)" if len(found) > 2 else ""
    return "; ".join(found[:2]) + more
