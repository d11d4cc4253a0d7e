"""The generative wires (targets/wire.py, spec/target.py, load/config.py, load/recorder.py): where a generation is
POSTed, its body, the target fields that choose it, and how the child's settings and records carry it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from recommender.correctness.figures import describe
from recommender.correctness.gate import check_outputs, judged_alike
from recommender.errors import LoadError
from recommender.job.protocol import target_identity
from recommender.load.config import ChildConfig
from recommender.load.recorder import RequestRecorder
from recommender.load.runner import LoadRequest, run_load
from recommender.load.shapes import PlanLevel, TrafficPlan
from recommender.load.token_stream import NO_ANSWER, Generation
from recommender.spec import ExperimentSpec, Phase
from recommender.targets.openai_endpoint import OpenAIEndpoint
from recommender.targets.wire import (
    KSERVE,
    OPENAI_CHAT,
    OPENAI_COMPLETIONS,
    generation_body,
    generation_problem,
    openai,
)

CHAT, COMPLETIONS = openai("/v1/", OPENAI_CHAT), openai("/v1", OPENAI_COMPLETIONS, stream=False)


def test_the_generative_wires_post_to_their_routes_and_say_they_generate() -> None:
    assert CHAT.path("m") == "/v1/chat/completions" and COMPLETIONS.path("m") == "/v1/completions"
    assert CHAT.generative and COMPLETIONS.generative and not openai("/v1").generative and not KSERVE.generative
    assert CHAT.stream and not COMPLETIONS.stream and CHAT.takes_text
    with pytest.raises(ValueError, match="unknown OpenAI wire 'openai-grpc'"):
        openai("", "openai-grpc")


def test_a_generation_body_pins_the_output_length_and_asks_for_usage_only_when_streamed() -> None:
    assert generation_body(CHAT, "tiny", "hi there", 16) == {
        "model": "tiny",
        "messages": [{"role": "user", "content": "hi there"}],
        "max_tokens": 16,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    messages = ({"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"})
    assert generation_body(CHAT, "tiny", messages, 4)["messages"] == list(messages)
    body = generation_body(COMPLETIONS, "tiny", "hi", 8, stream=False)
    assert body["prompt"] == "hi" and body["stream"] is False and "stream_options" not in body
    with pytest.raises(ValueError, match="prompt text, not chat messages"):
        generation_body(COMPLETIONS, "tiny", messages, 8)
    with pytest.raises(ValueError, match="does not generate"):
        generation_body(openai(), "tiny", "hi", 8)
    with pytest.raises(ValueError, match="at least 1"):
        generation_body(CHAT, "tiny", "hi", 0)


def test_a_non_streamed_answer_is_good_only_with_a_finish_and_text() -> None:
    good = {"choices": [{"message": {"content": "tok tok"}, "finish_reason": "length"}]}
    assert generation_problem(good, OPENAI_CHAT) is None
    assert "finish_reason" in (generation_problem({"choices": []}, OPENAI_CHAT) or "")
    empty = {"choices": [{"text": "", "finish_reason": "length"}]}
    assert "no generated text" in (generation_problem(empty, OPENAI_COMPLETIONS) or "")


def remote(**fields: object) -> ExperimentSpec:
    target = {"kind": "remote", "endpoint": "http://127.0.0.1:1/v1", "model": "tiny"} | fields
    return ExperimentSpec.model_validate({"name": "gen", "target": target})


@pytest.mark.parametrize("protocol", [OPENAI_CHAT, OPENAI_COMPLETIONS])
def test_a_remote_target_takes_the_generative_protocols_with_a_key_and_stream(protocol: str) -> None:
    target = remote(protocol=protocol, api_key_env="LLM_KEY", stream=False).target
    assert target.generative and target.stack == "openai" and not target.stream
    assert not remote(protocol="openai").target.generative


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"protocol": OPENAI_CHAT, "model": None}, "protocol openai-chat needs `model`"),
        ({"protocol": OPENAI_COMPLETIONS, "endpoint": "sagemaker://x"}, "needs an http(s):// url"),
        ({"protocol": "openai", "stream": False}, "stream is used by protocol openai-chat and openai-completions"),
        ({"protocol": "kserve", "api_key_env": "K"}, "api_key_env is used by the openai protocols only"),
    ],
)
def test_a_generative_target_is_checked_as_an_embeddings_one_is(fields: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=words.replace("(", r"\(").replace(")", r"\)")):
        remote(**fields)


def test_a_generative_targets_key_holds_what_its_generation_is_and_an_older_targets_key_stays() -> None:
    chat = target_identity(remote(protocol=OPENAI_CHAT).target)
    assert (chat["protocol"], chat["stream"], chat["model"]) == (OPENAI_CHAT, True, "tiny")
    assert target_identity(remote(protocol=OPENAI_CHAT, stream=False).target) != chat
    assert "protocol" not in target_identity(remote(protocol="openai").target)


def test_the_gate_does_not_check_a_generation_and_says_so() -> None:
    spec = ExperimentSpec(name="gen")
    endpoint = OpenAIEndpoint("http://127.0.0.1:1/v1", "tiny", "/v1", OPENAI_CHAT)
    correctness = check_outputs(endpoint, spec, max_batch_size=1).to_dict()
    assert (correctness["checked"], correctness["passed"]) == (False, True)
    assert correctness["reason"].startswith("not checked: generation")
    assert describe(correctness) == correctness["reason"]  # what the report says of it: not "correctness: off"
    assert judged_alike(correctness, spec, generative=True)  # a stored generation is reused, not measured again
    assert not judged_alike(correctness, spec)


def test_the_wire_and_stream_reach_the_child_and_a_worker(tmp_path: Path) -> None:
    payload = tmp_path / "payload.json"
    payload.write_text("[]")
    plan = TrafficPlan((PlanLevel(1, 0, 1),))
    config = ChildConfig("tiny", payload, plan, tmp_path / "r.npz", tmp_path / "p.json", wire=OPENAI_CHAT, stream=False)
    for rebuilt in (ChildConfig.from_env(config.to_env()), ChildConfig.from_message(config.to_message())):
        assert (rebuilt.wire, rebuilt.stream) == (OPENAI_CHAT, False)
    plain = ChildConfig("m", payload, plan, tmp_path / "r.npz", tmp_path / "p.json")
    assert (ChildConfig.from_env(plain.to_env()).wire, ChildConfig.from_env(plain.to_env()).stream) == ("kserve", True)


def test_a_generative_wire_is_refused_for_a_client_that_cannot_time_chunks(tmp_path: Path) -> None:
    request = LoadRequest(
        "http://127.0.0.1:1", "m", [{"prompt": "x"}], [Phase()], tmp_path, client="fasthttp", wire=OPENAI_CHAT
    )
    with pytest.raises(LoadError, match="cannot time a streamed answer per chunk"):
        run_load(request)


def generation(ttft: int, chunks: list[int], tokens: int = 0) -> Generation:
    return Generation(ttft, 5, tokens or len(chunks), not tokens, True, chunks)


def test_the_recorder_keeps_each_requests_chunk_times_as_a_slice_sorted_with_its_row() -> None:
    recorder = RequestRecorder()
    recorder.record(0.2, 900, True, 1, None, generation(100, [100, 200, 300]))
    recorder.record(0.1, 500, False, 1, None, NO_ANSWER)
    recorder.record(0.3, 700, True, 1, None, generation(50, [50, 60], tokens=4))
    log = recorder.log()
    assert log.generative and log.t_s.tolist() == [0.1, 0.2, 0.3]
    assert [log.chunk_times_us(i).tolist() for i in range(3)] == [[], [100, 200, 300], [50, 60]]
    assert log.ttft_us.tolist() == [-1, 100, 50] and log.output_tokens.tolist() == [0, 3, 4]
    assert log.tokens_counted.tolist() == [True, True, False] and log.finished.tolist() == [False, True, True]
    assert log.input_tokens.tolist() == [-1, 5, 5]


def test_a_workers_rows_carry_their_chunk_times_to_the_master() -> None:
    worker, master = RequestRecorder(), RequestRecorder()
    master.record(0.05, 100, True, 1, None, generation(10, [10, 20]))
    worker.record(0.1, 300, True, 1, None, generation(30, [30]))
    first = worker.rows_since(0)
    worker.record(0.2, 400, True, 1, None, generation(40, [40, 41, 42]))
    worker.record(0.3, 500, True, 1, None, generation(50, [50]))
    master.extend(first)
    master.extend(worker.rows_since(1))
    log = master.log()
    assert [log.chunk_times_us(i).tolist() for i in range(4)] == [[10, 20], [30], [40, 41, 42], [50]]
    assert np.array_equal(log.chunk_count, [2, 1, 3, 1])


def test_a_run_that_is_not_generative_has_no_generation_columns() -> None:
    recorder = RequestRecorder()
    recorder.record(0.1, 100, True, 1)
    assert not recorder.log().generative and "chunk_us" not in recorder.rows_since(0)
    assert json.dumps(sorted(recorder.rows_since(0))) == '["latency_us", "ok", "t_s", "users"]'


def test_synthetic_prompts_aimed_at_an_embeddings_target_are_refused_at_validate(tmp_path) -> None:
    """A mooncake trace or payload.generation sends prompts; an embeddings or Triton target cannot take them (before
    this refusal the Locust child failed on a payload index past the three texts)."""
    from recommender.errors import SpecError
    from recommender.spec.loader import load_spec

    path = tmp_path / "gen.yaml"
    path.write_text(
        "name: g\npayload:\n  generation: {input_tokens: {mean: 8}, output_tokens: {mean: 4}, count: 4}\n"
        "target: {kind: remote, protocol: openai, url: 'http://127.0.0.1:9/v1', model: m}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert "payload.generation: synthetic prompts are sent to generative endpoints only" in str(caught.value.problems)


def test_chat_messages_sent_to_a_completions_endpoint_are_refused_with_the_line(tmp_path) -> None:
    from recommender.errors import SpecError
    from recommender.spec.loader import load_spec

    (tmp_path / "p.jsonl").write_text('{"prompt": "hello there"}\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    path = tmp_path / "gen.yaml"
    path.write_text(
        "name: g\npayload: {file: p.jsonl}\n"
        "target: {kind: remote, protocol: openai-completions, url: 'http://127.0.0.1:9/v1', model: m}\n"
    )
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    text = " ".join(caught.value.problems)
    assert "p.jsonl: line 2: holds chat `messages`" in text and "speaks openai-completions" in text, text
