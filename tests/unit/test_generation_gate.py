"""The generation gate's rules (correctness/tokens.py: exact for fp32, token agreement and the reference token's
logprob per precision, near-ties), how a candidate's precision is read from its engine settings, how the server's
answers are read (generation_gate.py: token ids, prompt logprobs), the stored verdict's sentence and the gate's
settings (a run judged with other settings is measured again)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from recommender.candidates import Candidate, DynamicBatching
from recommender.correctness.cases import prompt_cases
from recommender.correctness.figures import describe
from recommender.correctness.gate import gate_settings, judged_alike, precision_of
from recommender.correctness.generation_gate import (
    STEP_PROBS,
    _teacher_forced,
    next_token_logprobs,
    served_precision,
    served_tokens,
    teacher_forced,
    tolerance_for,
)
from recommender.correctness.tokens import (
    TOKEN_TOLERANCES,
    Continuation,
    TeacherForced,
    TokenTolerance,
    engine_precision,
    judge,
    token_tolerance,
    verdict,
)
from recommender.spec import ExperimentSpec
from recommender.targets.wire import openai

REFERENCE = Continuation(tokens=[5, 6, 7, 8], logprobs=[-1.0, -2.0, -3.0, -4.0], margins=[0.5, 0.5, 0.5, 0.5])
FP32, BF16 = TOKEN_TOLERANCES["fp32"], TOKEN_TOLERANCES["bf16"]
decode = lambda token: f"w{token}"


def forced(top: list[int], shift: float = 0.0) -> TeacherForced:
    return TeacherForced([lp + shift for lp in REFERENCE.logprobs], top)


def test_fp32_must_match_exactly_and_the_verdict_names_the_first_divergence_and_both_tokens() -> None:
    same = judge("prompt 1", REFERENCE, [5, 6, 7, 8], forced([5, 6, 7, 8]), FP32, decode)
    assert (same.agreement, same.first_divergence, same.max_logprob_error) == (1.0, None, 0.0)
    assert verdict([same], FP32, "fp32") is None
    late = judge("prompt 2", REFERENCE, [5, 6, 7, 9], forced([5, 6, 7, 8]), FP32, decode)
    assert late.agreement == 0.75 and late.first_divergence is not None
    assert (late.first_divergence["position"], late.first_divergence["served_id"]) == (3, 9)
    reason = verdict([same, late], FP32, "fp32")
    assert reason == (
        "greedy token agreement 0.75 < 1 (fp32) on prompt 2: first diverging at token 3, served 'w9' vs reference 'w8'"
    )


def test_an_answer_shorter_than_asked_diverges_where_it_ended() -> None:
    short = judge("prompt 1", REFERENCE, [5, 6], None, FP32, decode)
    assert short.agreement == 0.5 and short.first_divergence is not None
    assert short.first_divergence["position"] == 2 and "ended" in short.first_divergence["served"]


def test_lower_precision_is_judged_teacher_forced_and_a_flip_at_a_near_tie_is_a_tie() -> None:
    # free-running it leaves the reference at token 1 (every later token follows another prefix), teacher forced only
    # position 1 disagrees: 3 of 4 agree, below bf16's 0.9
    flipped = judge("prompt 1", REFERENCE, [5, 9, 9, 9], forced([5, 9, 7, 8], 0.01), BF16, decode)
    assert (flipped.agreement, flipped.ties, flipped.teacher_forced) == (0.75, 0, True)
    assert "teacher-forced token agreement 0.75 < 0.9 (bf16)" in (verdict([flipped], BF16, "bf16") or "")
    # the same flip where the reference's own top-2 margin (0.015) is within what the error measured there (0.01 on
    # each of two logprobs) can flip, and within bf16's logprob tolerance: a tie, not a change
    tied_reference = Continuation(REFERENCE.tokens, REFERENCE.logprobs, [0.5, 0.015, 0.5, 0.5])
    tie = judge("prompt 1", tied_reference, [5, 9, 9, 9], forced([5, 9, 7, 8], 0.01), BF16, decode)
    assert (tie.agreement, tie.ties) == (1.0, 1) and verdict([tie], BF16, "bf16") is None
    assert tie.first_divergence is not None and tie.first_divergence["position"] == 1  # kept in the figures
    # an error too small to flip that margin (2 x 0.005 < 0.015) leaves the flip unexplained: a disagreement
    unexplained = judge("prompt 1", tied_reference, [5, 9, 9, 9], forced([5, 9, 7, 8], 0.005), BF16, decode)
    assert (unexplained.agreement, unexplained.ties) == (0.75, 0)
    # a loose row's tolerance does not excuse a flip the measured error cannot explain either
    assert judge("prompt 1", REFERENCE, [5, 9], forced([5, 9, 7, 8], 0.1), token_tolerance("q4"), decode).ties == 0


def test_lower_precision_is_refused_when_the_reference_tokens_logprobs_move_beyond_its_tolerance() -> None:
    within = judge("prompt 1", REFERENCE, REFERENCE.tokens, forced(REFERENCE.tokens, -0.04), BF16, decode)
    assert verdict([within], BF16, "bf16") is None
    moved = judge("prompt 1", REFERENCE, REFERENCE.tokens, forced(REFERENCE.tokens, -0.06), BF16, decode)
    assert moved.max_logprob_error == pytest.approx(0.06)
    assert "logprob error of the reference tokens 0.06 > 0.05 (bf16) on prompt 1" in (
        verdict([moved], BF16, "bf16") or ""
    )
    assert verdict([moved], token_tolerance("q4"), "q4") is None  # a quantised candidate's tolerance is looser


def test_without_logprobs_lower_precision_is_judged_free_running_up_to_a_near_tie() -> None:
    changed = judge("prompt 1", REFERENCE, [5, 6, 9, 9], None, BF16, decode)
    assert (changed.agreement, changed.teacher_forced, changed.max_logprob_error) == (0.5, False, None)
    assert "greedy token agreement 0.5 < 0.9 (bf16) on prompt 1: first diverging at token 2" in (
        verdict([changed], BF16, "bf16") or ""
    )
    tied_reference = Continuation(REFERENCE.tokens, REFERENCE.logprobs, [0.5, 0.5, 0.0, 0.5])
    assert judge("prompt 1", tied_reference, [5, 6, 9, 9], None, BF16, decode).agreement == 1.0


@pytest.mark.parametrize(
    ("engine", "precision"),
    [
        ({"dtype": "float32"}, "fp32"),
        ({"dtype": "bfloat16"}, "bf16"),
        ({"dtype": "half"}, "fp16"),
        ({}, "auto"),  # vLLM's default: a float32 model downcast to its platform's 16-bit type
        ({"dtype": "float32", "quantization": "fp8"}, "q8"),
        ({"quant": "Q4_K_M"}, "q4"),
        # llama.cpp's candidates: the loosest of their GGUF type, their KV cache's (llama-server's own: f16) and their
        # attention's (flash attention, llama-server's own on a CPU, is fp16)
        ({"gguf_type": "f32", "parallel": 4}, "fp16"),
        ({"gguf_type": "f32", "kv_cache": "f32"}, "fp16"),
        ({"gguf_type": "f32", "flash_attn": False}, "fp16"),
        ({"gguf_type": "f32", "kv_cache": "f32", "flash_attn": False}, "fp32"),
        ({"gguf_type": "f32", "kv_cache": "f32", "flash_attn": True}, "fp16"),
        ({"gguf_type": "f32", "kv_cache": "bf16", "flash_attn": False}, "bf16"),
        ({"gguf_type": "q8_0"}, "q8"),
        ({"gguf_type": "q8_0", "kv_cache": "f32", "flash_attn": False}, "q8"),
        ({"gguf_type": "q4_K_M"}, "q4"),
    ],
)
def test_a_generative_candidates_precision_is_read_from_its_engine_settings(engine: dict, precision: str) -> None:
    assert engine_precision(engine) == precision
    candidate = Candidate("vllm", DynamicBatching(), 1, 8, "local-cpu", engine=json.dumps({"protocol": "x", **engine}))
    assert precision_of(candidate.config()) == precision
    assert precision_of(Candidate("pt", None, 1, 8, "local-cpu").config()) == "fp32"


def test_the_servers_token_ids_are_read_and_a_text_only_answer_is_tokenized_and_said_so() -> None:
    tokenize = lambda text: [len(word) for word in text.split()]
    assert served_tokens({"choices": [{"text": "a bb", "token_ids": [3, 4]}]}, tokenize) == ([3, 4], "served")
    assert served_tokens({"choices": [{"text": "a bb"}]}, tokenize) == ([1, 2], "re-tokenized")
    # llama-server asked n_probs: each generated token's id in its logprobs (what its OpenAI completions route has)
    llama_cpp = {"text": "a bb", "logprobs": {"content": [{"id": 7, "token": "a"}, {"id": 8, "token": " bb"}]}}
    assert served_tokens({"choices": [llama_cpp]}, tokenize) == ([7, 8], "served")
    assert served_tokens({"choices": [{"text": "a bb", "logprobs": None}]}, tokenize) == ([1, 2], "re-tokenized")


def test_prompt_logprobs_give_the_reference_tokens_logprob_and_the_candidates_top_token() -> None:
    rows = [
        None,
        {"11": {"logprob": -0.5, "rank": 1}},
        {"5": {"logprob": -1.5, "rank": 2}, "4": {"logprob": -1.2, "rank": 1}},  # the candidate prefers 4
        {"6": {"logprob": -2.5, "rank": 1}},
    ]
    found = teacher_forced({"choices": [{"text": "", "prompt_logprobs": rows}]}, 2, [5, 6])
    assert found == TeacherForced([-1.5, -2.5], [4, 6])
    assert teacher_forced({"choices": [{"text": ""}]}, 2, [5, 6]) is None  # a server that returns none
    assert teacher_forced({"choices": [{"prompt_logprobs": rows[:3]}]}, 2, [5, 6]) is None


class StepServer:
    """A server without prompt logprobs that answers one token with its most probable ones, as llama-server does
    (`logprobs.content[0]`: the token generated, `top_logprobs`); `probs(prompt)` gives {token: logprob}."""

    model_name = "model"
    wire = openai("/v1", "openai-completions")

    def __init__(self, probs) -> None:
        self.probs, self.asked = probs, []

    def _call(self, method: str, path: str, what: str, body: dict, timeout_s: float) -> dict:
        self.asked.append(body)
        if "n_probs" not in body:  # vLLM's prompt_logprobs request: ignored, one token without logprobs
            return {"choices": [{"text": "w", "logprobs": None}]}
        ranked = sorted(self.probs(body["prompt"]).items(), key=lambda item: -item[1])[: body["n_probs"]]
        top = [{"id": token, "token": f"w{token}", "logprob": logprob} for token, logprob in ranked]
        content = [{"id": top[0]["id"], "logprob": top[0]["logprob"], "top_logprobs": top}] if top else []
        return {"choices": [{"text": "w", "logprobs": {"content": content} if content else None}]}


def test_a_server_without_prompt_logprobs_is_teacher_forced_one_position_at_a_time() -> None:
    # after the prompt [1, 2] and the reference prefix, the server prefers the reference token except at position 2
    def probs(prompt: list[int]) -> dict[int, float]:
        position = len(prompt) - 2
        expected = REFERENCE.tokens[position]
        return {expected: -1.2, 4: -1.1} if position == 2 else {expected: REFERENCE.logprobs[position] + 0.01, 4: -9.0}

    server = StepServer(probs)
    forced = _teacher_forced(server, "prompt 1", [1, 2], REFERENCE)
    assert forced == TeacherForced([-0.99, -1.99, -1.2, -3.99], [5, 6, 4, 8])
    steps = [body for body in server.asked if "n_probs" in body]  # after the one prompt_logprobs request
    assert [b["prompt"] for b in steps] == [[1, 2], [1, 2, 5], [1, 2, 5, 6], [1, 2, 5, 6, 7]]
    assert all(b["max_tokens"] == 1 and b["temperature"] == 0 and b["n_probs"] == STEP_PROBS for b in steps)
    # the reference token outside its top tokens at some position: not teacher forced (free-running judges it)
    assert _teacher_forced(StepServer(lambda prompt: {4: -0.1}), "prompt 1", [1, 2], REFERENCE) is None
    # a server that returns no logprobs at all: one step asked, then free-running
    silent = StepServer(lambda prompt: {})
    assert _teacher_forced(silent, "prompt 1", [1, 2], REFERENCE) is None and len(silent.asked) == 2
    assert next_token_logprobs({"choices": [{"text": "w", "logprobs": None}]}) is None


def test_the_gate_prompts_are_the_shortest_median_and_longest() -> None:
    assert prompt_cases([10, 15, 14]) == [("prompt 1", 0), ("prompt 2", 1), ("prompt 3", 2)]
    assert prompt_cases([7, 7, 3, 9, 9]) == [("prompt 1", 0), ("prompt 3", 2), ("prompt 4", 3)]


def llama_spec(**correctness) -> ExperimentSpec:
    return ExperimentSpec(
        name="gen",
        model={"source": "llama", "architecture": {"layers": 2, "hidden": 128, "heads": 4}},
        target={"kind": "vllm"},
        correctness=correctness,
    )


def test_a_generative_run_is_judged_again_when_its_tokens_or_precision_differ() -> None:
    spec = llama_spec()
    settings = gate_settings(spec, "bf16", generative=True)
    assert settings == {"generated_tokens": 16, "min_agreement": 0.9, "logprob_atol": 0.05}
    stored = {"checked": True, "passed": True, "tolerance": settings}
    assert judged_alike(stored, spec, "bf16", generative=True)
    assert not judged_alike(stored, spec, "fp32", generative=True)
    assert not judged_alike(stored, llama_spec(generated_tokens=32), "bf16", generative=True)
    never_gated = {"checked": False, "passed": True, "reason": "not checked: generation (...)"}
    assert not judged_alike(never_gated, spec, "bf16", generative=True)  # measured before the gate: gated now


def test_an_experiment_may_state_the_generation_tolerances_and_they_are_stored_and_judged_with() -> None:
    """A stated bound replaces the precision row's (as atol / rtol / min_cosine do for an embedding); the other
    stays the row's; a run judged with other bounds is measured again."""
    strict = llama_spec(min_agreement=1, logprob_atol=0.001)
    assert tolerance_for(strict, "bf16") == TokenTolerance(1.0, 0.001)
    assert tolerance_for(llama_spec(logprob_atol=0.5), "bf16") == TokenTolerance(0.9, 0.5)
    assert tolerance_for(llama_spec(), "bf16") == BF16
    settings = gate_settings(strict, "bf16", generative=True)
    assert settings == {"generated_tokens": 16, "min_agreement": 1.0, "logprob_atol": 0.001}
    stored = {"checked": True, "passed": True, "tolerance": gate_settings(llama_spec(), "bf16", generative=True)}
    assert not judged_alike(stored, strict, "bf16", generative=True)


@pytest.mark.parametrize(
    ("asked", "served", "judged"),
    [
        ("auto", "bfloat16", "bf16"),  # vLLM's auto on the CPU: this float32 Llama downcast to bf16
        ("auto", "float16", "fp16"),
        ("auto", "float32", "fp32"),
        ("auto", None, "auto"),  # the engine did not say: the 16-bit types' loosest row
        ("fp32", "float32", "fp32"),
        ("q8", "bfloat16", "q8"),  # quantised weights stay judged as quantised
    ],
)
def test_auto_is_judged_at_the_dtype_the_engine_served(asked: str, served: str | None, judged: str) -> None:
    endpoint = SimpleNamespace(served_dtype=served)
    assert served_precision(endpoint, asked) == judged  # type: ignore[arg-type]


def test_a_stored_auto_run_is_reused_at_the_precision_its_engine_served() -> None:
    """Judged at fp16 (what auto served on that host), a run is reused when its candidate asks `auto` again, though
    the `auto` row's bounds differ from fp16's."""
    spec = llama_spec()
    stored = {"checked": True, "passed": True, "precision": "fp16", "tolerance": gate_settings(spec, "fp16", True)}
    assert gate_settings(spec, "fp16", True) != gate_settings(spec, "auto", True)
    assert judged_alike(stored, spec, "auto", generative=True)
    assert not judged_alike(stored, spec, "fp32", generative=True)


def test_the_stored_verdict_reads_as_one_sentence() -> None:
    reference = {"kind": "transformers fp32 greedy on CPU", "library": "transformers", "version": "5.0"}
    tolerance = {"generated_tokens": 16, "min_agreement": 1.0, "logprob_atol": 0.001}
    passed = {"checked": True, "passed": True, "tolerance": tolerance, "precision": "fp32", "reference": reference}
    passed["figures"] = [{}, {}, {}]
    assert describe(passed) == (
        "greedy tokens match the reference (transformers fp32 greedy on CPU, transformers 5.0) exactly at fp32, "
        "16 tokens of 3 prompts"
    )
    failed = passed | {"passed": False, "reason": "greedy token agreement 0.25 < 1 (fp32) on prompt 1"}
    assert describe(failed).endswith("at fp32: greedy token agreement 0.25 < 1 (fp32) on prompt 1")
