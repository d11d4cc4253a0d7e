"""Reading a generative answer per chunk (load/token_stream.py): byte checks, the last chunk's parse, the verdict."""

from __future__ import annotations

import json

import pytest

from recommender.load.token_stream import NO_ANSWER, TokenStream, answered, has_text, not_null
from recommender.targets.wire import CONTENT_KEYS, OPENAI_CHAT, OPENAI_COMPLETIONS

MS = 1_000_000  # ns


def chat_chunk(content: str | None, finish: str | None = None, role: bool = False, spaced: bool = False) -> bytes:
    delta = {"role": "assistant", "content": content} if role else {"content": content}
    chunk = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    text = json.dumps(chunk) if spaced else json.dumps(chunk, separators=(",", ":"))
    return b"data: " + text.encode() + b"\n\n"


def completion_chunk(text: str, finish: str | None = None) -> bytes:
    chunk = {"choices": [{"index": 0, "text": text, "finish_reason": finish}]}
    return b"data: " + json.dumps(chunk).encode() + b"\n\n"


USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}\n\n'
DONE = b"data: [DONE]\n\n"


def fed(wire: str, events: list[bytes], every_ms: int = 10) -> TokenStream:
    stream = TokenStream(CONTENT_KEYS[wire], origin_ns=5 * MS)
    for index, event in enumerate(events, start=1):
        stream.feed(event, 5 * MS + index * every_ms * MS)
    return stream


@pytest.mark.parametrize(
    ("payload", "text", "present"),
    [
        (b'{"delta":{"content":"a"}}', True, True),
        (b'{"delta":{"content": "a"}}', True, True),
        (b'{"delta":{"content":""}}', False, True),
        (b'{"delta":{"content":null}}', False, False),
        (b'{"delta":{"role":"assistant"}}', False, False),
        (b'{"delta":{"content":"\\""}}', True, True),  # an escaped quote is text
    ],
)
def test_the_byte_checks_tell_text_from_empty_and_null(payload: bytes, text: bool, present: bool) -> None:
    assert has_text(payload, b'"content":') is text
    assert not_null(payload, b'"content":') is present


def test_a_chat_stream_with_usage_takes_the_servers_counts_and_times_each_content_chunk() -> None:
    events = [chat_chunk("", role=True), chat_chunk("a"), chat_chunk("b"), chat_chunk("c", "length"), USAGE, DONE]
    ok, reason, generation = fed(OPENAI_CHAT, events).outcome()
    assert (ok, reason) == (True, None)
    assert generation.chunk_us == [20_000, 30_000, 40_000]  # the role chunk (no content) is no token
    assert generation.ttft_us == 20_000
    assert (generation.input_tokens, generation.output_tokens, generation.tokens_counted) == (7, 3, False)
    assert generation.finished


def test_without_usage_the_content_chunks_are_counted_and_the_input_is_unknown() -> None:
    events = [completion_chunk("x"), completion_chunk("y"), completion_chunk("z", "stop"), DONE]
    ok, _, generation = fed(OPENAI_COMPLETIONS, events).outcome()
    assert ok and generation.output_tokens == 3 and generation.tokens_counted and generation.input_tokens == -1


def test_spaced_json_as_python_writes_it_is_read_the_same() -> None:
    events = [chat_chunk("a", spaced=True), chat_chunk("b", "length", spaced=True), DONE]
    ok, _, generation = fed(OPENAI_CHAT, events).outcome()
    assert ok and generation.output_tokens == 2 and len(generation.chunk_us) == 2


@pytest.mark.parametrize(
    ("events", "reason"),
    [
        ([chat_chunk("a"), chat_chunk("b", "length")], "without data: [DONE]"),
        ([chat_chunk("a"), chat_chunk("b"), DONE], "without a chunk carrying a finish_reason"),
        ([chat_chunk("", role=True), chat_chunk("", "length"), DONE], "no output token"),
        ([chat_chunk("a"), b'data: {"choices":[{"finish_reason":"length",\n\n', DONE], "not JSON"),
        ([chat_chunk("a", "length"), DONE, chat_chunk("b")], "after data: [DONE]"),
    ],
)
def test_a_stream_that_does_not_end_cleanly_is_a_failure_with_its_reason(events: list[bytes], reason: str) -> None:
    ok, said, generation = fed(OPENAI_CHAT, events).outcome()
    assert not ok and said is not None and reason in said
    assert generation.finished is (reason in ("no output token", "after data: [DONE]"))  # both ended cleanly


def test_comments_and_other_fields_are_skipped() -> None:
    events = [b": keep-alive\n\n", b"event: ping\n\n", chat_chunk("a", "length"), DONE]
    ok, _, generation = fed(OPENAI_CHAT, events).outcome()
    assert ok and generation.chunk_us == [30_000]


def test_a_non_streamed_answer_is_one_chunk_at_the_end_to_end_time() -> None:
    answer = {
        "choices": [{"message": {"content": "a b c"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 3},
    }
    ok, reason, generation = answered(json.dumps(answer).encode(), OPENAI_CHAT, 12_345)
    assert (ok, reason) == (True, None)
    assert generation.ttft_us == 12_345 and generation.chunk_us == [12_345]
    assert (generation.input_tokens, generation.output_tokens, generation.tokens_counted) == (4, 3, False)


def test_a_non_streamed_answer_without_a_finish_or_not_json_fails() -> None:
    unfinished = json.dumps({"choices": [{"text": "a", "finish_reason": None}]}).encode()
    assert "finish_reason" in (answered(unfinished, OPENAI_COMPLETIONS, 1)[1] or "")
    assert answered(b"<html>", OPENAI_COMPLETIONS, 1) == (False, "the answer is not JSON (<html>)", NO_ANSWER)
