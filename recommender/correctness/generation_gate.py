"""The gate of a generative endpoint: the gate's prompts through the server at temperature 0, judged against the
reference (transformers fp32 greedy on the served folder's weights; correctness/tokens.py's rules).

    check_generation(endpoint, spec, folder, precision) -> Correctness

Each prompt is sent as token ids (the served folder's tokenizer; chat prompts through its chat template) to the
server's completions route, so that the candidate and the reference start from the same ids whatever the wire:
- free-running: N tokens, temperature 0, end of sequence ignored, the token ids asked for (`return_token_ids`: vLLM;
  `n_probs: 1`: llama.cpp's llama-server gives each generated token's id with its probabilities, and each server
  ignores the other's field); a server that returns neither has its text tokenized here (said per prompt:
  `token_ids: re-tokenized`);
- teacher forcing: the prompt followed by the reference's N tokens, one token asked, `prompt_logprobs: 1` (vLLM:
  per prompt position, the logprob of the token there with its rank, and the top token); a server that returns no
  prompt logprobs (llama-server) is asked one step per position instead: the prompt followed by the reference's
  first k tokens, one token asked with its STEP_PROBS most probable tokens and their logprobs (`n_probs`: llama.cpp
  computes them over the whole vocabulary), so the logprob it gives the reference token there and its own top token;
  a server that gives neither, or whose top STEP_PROBS at some position leave the reference token out, is judged on
  its free-running tokens alone.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from recommender.correctness.cases import prompt_cases
from recommender.correctness.figures import Correctness
from recommender.correctness.reference import GenerationReference, generation_reference
from recommender.correctness.tokens import (
    Continuation,
    TeacherForced,
    TokenTolerance,
    engine_precision,
    judge,
    token_tolerance,
    verdict,
)
from recommender.errors import TargetError
from recommender.load.prompts import prompts_for
from recommender.spec import ExperimentSpec
from recommender.targets.wire import OPENAI_CHAT, OPENAI_COMPLETIONS, Wire, first_choice, generated_text, openai

STEP_PROBS = 20  # teacher forcing one step at a time: the most probable tokens asked for at each position


class GenerativeEndpoint(Protocol):
    model_name: str
    served_dtype: str | None  # what the engine says it serves at (None: it does not say)

    @property
    def wire(self) -> Wire: ...

    # OpenAIEndpoint's request with its error policy (one TargetError naming what was asked and where): the gate
    # asks the completions route, which takes token ids, whatever route the load uses
    def _call(self, method: str, path: str, what: str, body: dict | None, timeout_s: float) -> Any: ...


def tolerance_for(spec: ExperimentSpec, precision: str) -> TokenTolerance:
    """The precision's row of the table, each of its two bounds replaced by the experiment's where it states one
    (`correctness.min_agreement`, `correctness.logprob_atol`), as atol / rtol / min_cosine are for an embedding."""
    assert spec.correctness != "off"  # the caller checks
    row, given = token_tolerance(precision), spec.correctness
    return TokenTolerance(
        row.min_agreement if given.min_agreement is None else given.min_agreement,
        row.logprob_atol if given.logprob_atol is None else given.logprob_atol,
    )


def served_precision(endpoint: GenerativeEndpoint, precision: str) -> str:
    """The precision to judge at: `auto` (the engine's own choice) becomes the dtype the engine says it served
    (VllmDeployment.served_dtype, read from its start log: vLLM 0.32 downcasts this float32 model to bf16 on an
    x86 or aarch64 CPU), so that the tolerance and the stored precision say what was served; `auto` when the
    engine does not say (its row is the 16-bit types' loosest)."""
    served = endpoint.served_dtype
    return engine_precision({"dtype": served}) if precision == "auto" and served else precision


def tolerance_settings(spec: ExperimentSpec, precision: str) -> dict[str, Any]:
    """What a generative run is judged with (stored as its tolerance; a run judged otherwise is measured again)."""
    assert spec.correctness != "off"  # the caller checks
    tolerance = tolerance_for(spec, precision)
    return {
        "generated_tokens": spec.correctness.generated_tokens,
        "min_agreement": tolerance.min_agreement,
        "logprob_atol": tolerance.logprob_atol,
    }


def check_generation(endpoint: GenerativeEndpoint, spec: ExperimentSpec, folder: Path, precision: str) -> Correctness:
    """The gate's prompts (shortest, median, longest by input tokens) through the endpoint, judged; a Correctness."""
    assert spec.correctness != "off"  # the caller checks
    precision = served_precision(endpoint, precision)
    n, tolerance = spec.correctness.generated_tokens, tolerance_for(spec, precision)
    reference = generation_reference(folder)
    prompts = prompts_for(spec, Path("."))  # the spec's paths are absolute once loaded
    chat = endpoint.wire.name == OPENAI_CHAT
    figures = []
    for name, index in prompt_cases([prompt.input_tokens for prompt in prompts]):
        ids = reference.prompt_ids(prompts[index].content, chat)
        expected = reference.continuation(ids, n)
        served, token_ids = _free_running(endpoint, name, ids, n, reference)
        forced = _teacher_forced(endpoint, name, ids, expected)
        figures.append(judge(name, expected, served, forced, tolerance, reference.decode, token_ids))
    reason = verdict(figures, tolerance, precision)
    return Correctness(
        True,
        reason is None,
        reason,
        tolerance_settings(spec, precision),
        precision,
        reference.identity,
        [f.to_dict() for f in figures],
    )


def _post(endpoint: GenerativeEndpoint, case: str, body: dict) -> dict:
    path = openai(endpoint.wire.prefix, OPENAI_COMPLETIONS).path(endpoint.model_name)
    answer = endpoint._call("POST", path, f"the correctness gate's request for {case}", body, 120.0)
    if not first_choice(answer):
        raise TargetError(f"the correctness gate's request for {case} was answered with no choice: {str(answer)[:200]}")
    return answer


def _free_running(
    endpoint: GenerativeEndpoint, case: str, ids: list[int], n: int, reference: GenerationReference
) -> tuple[list[int], str]:
    """The candidate's N greedy tokens: the server's token ids, else its text tokenized here."""
    body = _body(endpoint, ids, n) | {"return_token_ids": True, "n_probs": 1}
    answer = _post(endpoint, case, body)
    return served_tokens(answer, reference.tokenize)


def served_tokens(answer: dict, tokenize: Callable[[str], list[int]]) -> tuple[list[int], str]:
    """(token ids, how they were read): the choice's `token_ids` (vLLM), else the `id` of each generated token in its
    `logprobs.content` (llama-server, asked `n_probs`), both "served"; else its text tokenized ("re-tokenized": a
    detokenized text may not tokenize back to the same ids, so such a prompt can look diverged)."""
    choice = first_choice(answer)
    ids = choice.get("token_ids")
    if not isinstance(ids, list):
        logprobs = choice.get("logprobs")
        content = logprobs.get("content") if isinstance(logprobs, dict) else None
        ids = [entry.get("id") if isinstance(entry, dict) else None for entry in content or []] or None
    if isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) for i in ids):
        return list(ids), "served"
    return list(tokenize(generated_text(answer, OPENAI_COMPLETIONS))), "re-tokenized"


def _teacher_forced(
    endpoint: GenerativeEndpoint, case: str, ids: list[int], expected: Continuation
) -> TeacherForced | None:
    body = _body(endpoint, ids + expected.tokens, 1) | {"prompt_logprobs": 1}
    forced = teacher_forced(_post(endpoint, case, body), len(ids), expected.tokens)
    return forced if forced is not None else _stepwise(endpoint, case, ids, expected.tokens)


def _stepwise(endpoint: GenerativeEndpoint, case: str, ids: list[int], tokens: list[int]) -> TeacherForced | None:
    """Teacher forcing one position at a time (a server without prompt logprobs); None where it cannot be read."""
    logprobs, top = [], []
    for position, token in enumerate(tokens):
        body = _body(endpoint, ids + tokens[:position], 1) | {"n_probs": STEP_PROBS}
        step = next_token_logprobs(_post(endpoint, case, body))
        if step is None or token not in step[1]:
            return None
        top.append(step[0])
        logprobs.append(step[1][token])
    return TeacherForced(logprobs, top)


def next_token_logprobs(answer: dict) -> tuple[int, dict[int, float]] | None:
    """(the token generated, {token id: logprob} of the most probable ones) of a one-token answer with llama-server's
    `logprobs.content` (asked `n_probs`); None when it has none."""
    logprobs = first_choice(answer).get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], dict):
        return None
    first = content[0]
    entries = [e for e in first.get("top_logprobs") or [] if isinstance(e, dict)]
    found = {e["id"]: float(e["logprob"]) for e in entries if isinstance(e.get("id"), int) and "logprob" in e}
    chosen = first.get("id")
    if not found or not isinstance(chosen, int):
        return None
    return chosen, found


def teacher_forced(answer: dict, prompt_length: int, tokens: list[int]) -> TeacherForced | None:
    """The candidate's figures at the reference tokens' positions from `prompt_logprobs` (a list, one entry per
    prompt position: {token id: {logprob, rank}}, the token there and the top one); None when the answer has none
    for every such position (a server that does not return them)."""
    rows = first_choice(answer).get("prompt_logprobs")
    if not isinstance(rows, list) or len(rows) < prompt_length + len(tokens):
        return None
    logprobs, top = [], []
    for position, token in enumerate(tokens):
        row = rows[prompt_length + position]
        if not isinstance(row, dict):
            return None
        entries = {int(key): value for key, value in row.items() if isinstance(value, dict)}
        if token not in entries:
            return None
        logprobs.append(float(entries[token]["logprob"]))
        top.append(min(entries, key=lambda key: (entries[key].get("rank") or 1 << 30, -entries[key]["logprob"])))
    return TeacherForced(logprobs, top)


def _body(endpoint: GenerativeEndpoint, prompt: list[int], max_tokens: int) -> dict:
    """A completions request of token ids, greedy, its length pinned, not streamed."""
    return {
        "model": endpoint.model_name,
        "prompt": prompt,
        "max_tokens": max_tokens,
        "temperature": 0,
        "ignore_eos": True,
        "stream": False,
    }


__all__ = [
    "check_generation",
    "next_token_logprobs",
    "served_precision",
    "served_tokens",
    "teacher_forced",
    "tolerance_for",
    "tolerance_settings",
]
