"""Reading a generative answer (OpenAI chat or completions) the way the Locust child times it: per chunk, the clock.

No Locust, no gevent: the child feeds it one server-sent event at a time with the time it arrived, and unit tests feed
it bytes. What a chunk costs is kept to byte checks (docs/design.md "Generation"): a chunk is a content chunk when its
content key (`"content":` for chat's delta, `"text":` for completions) is followed by a non-empty string; only a chunk
whose `finish_reason` or `usage` is not null is parsed as JSON (the last one or two of a stream).

    stream = TokenStream(CONTENT_KEYS[wire], origin_ns)
    stream.feed(event, now_ns)            # each event as it arrives
    ok, reason, generation = stream.outcome()
    answered(content, wire, elapsed_us)   # a non-streamed answer: one JSON body, ttft = end-to-end

A request is good only when the answer is HTTP 200 (the caller's check), a chunk carried a `finish_reason` and then
`data: [DONE]` came, and at least one output token arrived. Output tokens are the server's `usage.completion_tokens`
when it sends usage, else the content chunks counted here (a chunk may hold several tokens: the count is then low, and
the record says it was counted); input tokens are `usage.prompt_tokens`, else -1 (unknown).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from recommender.targets.wire import finish_reason, generated_text, quoted

_DATA = b"data:"
_DONE = b"[DONE]"
_FINISH = b'"finish_reason":'
_USAGE = b'"usage":'
_SPACES = b" \t\r\n"


@dataclass(frozen=True)
class Generation:
    """What one generative request recorded (metrics/records.py GENERATION_DTYPES): times in us from the request's
    origin (its send; open loop: its scheduled send)."""

    ttft_us: int  # the first content chunk; -1: none came
    input_tokens: int  # the server's usage.prompt_tokens; -1: unknown
    output_tokens: int
    tokens_counted: bool  # True: content chunks counted here; False: the server's usage
    finished: bool  # a finish_reason, then [DONE]
    chunk_us: tuple[int, ...] | list[int] = ()  # every content chunk's arrival


NO_ANSWER = Generation(-1, -1, 0, True, False)  # a request that got no answer (refused, reset, timed out, not 200)


def _value_at(payload: bytes, key: bytes) -> int:
    """Where the value of the first `key` (a JSON object key with its colon) starts, spaces skipped; -1: no key."""
    at = payload.find(key)
    if at < 0:
        return -1
    at += len(key)
    while payload[at : at + 1] in (b" ", b"\t"):
        at += 1
    return at


def has_text(payload: bytes, key: bytes) -> bool:
    """The value of `key` is a non-empty JSON string (a byte check: a quote not followed by the closing quote)."""
    at = _value_at(payload, key)
    return at >= 0 and payload[at : at + 1] == b'"' and payload[at + 1 : at + 2] != b'"'


def not_null(payload: bytes, key: bytes) -> bool:
    """`key` is there and its value is not null."""
    at = _value_at(payload, key)
    return at >= 0 and payload[at : at + 4] != b"null" and payload[at : at + 1] != b""


@dataclass
class TokenStream:
    """One streamed answer, fed event by event (an event: the bytes up to and including its blank line)."""

    content_key: str  # wire.CONTENT_KEYS: "content" (chat) or "text" (completions)
    origin_ns: int
    chunk_us: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    done: bool = False
    usage: dict[str, Any] | None = None
    problem: str | None = None
    key: bytes = field(init=False)

    def __post_init__(self) -> None:
        self.key = b'"' + self.content_key.encode() + b'":'

    def feed(self, event: bytes, now_ns: int) -> None:
        """One event and its arrival (monotonic ns); lines other than `data:` (comments, `event:`, `id:`) are
        skipped."""
        at = event.find(_DATA)
        if at < 0:
            return
        payload = event[at + len(_DATA) :].strip(_SPACES)
        if payload == _DONE:
            self.done = True
            return
        if self.done and self.problem is None:
            self.problem = "the stream went on after data: [DONE]"
        if has_text(payload, self.key):
            self.chunk_us.append((now_ns - self.origin_ns) // 1000)
        if not_null(payload, _FINISH) or not_null(payload, _USAGE):
            self._last_chunk(payload)

    def _last_chunk(self, payload: bytes) -> None:
        """The chunk with the finish_reason or the usage, parsed (the only one or two of a stream that are)."""
        try:
            chunk = json.loads(payload)
        except (ValueError, RecursionError):
            self.problem = self.problem or f"a stream chunk is not JSON ({quoted(payload)})"
            return
        finish = finish_reason(chunk)
        if finish is not None:
            self.finish_reason = finish
        usage = chunk.get("usage") if isinstance(chunk, dict) else None
        if isinstance(usage, dict):
            self.usage = usage

    def outcome(self) -> tuple[bool, str | None, Generation]:
        """Whether the request was good, why not (one line), and what it recorded."""
        finished = self.finish_reason is not None and self.done
        generation = _generation(self.chunk_us, self.usage, finished)
        reason = self.problem
        if reason is None and not self.done:
            reason = "the stream ended without data: [DONE]"
        if reason is None and self.finish_reason is None:
            reason = "the stream ended without a chunk carrying a finish_reason"
        if reason is None and generation.output_tokens < 1:
            reason = "the stream carried no output token"
        return reason is None, reason, generation


def answered(content: bytes, wire: str, elapsed_us: int) -> tuple[bool, str | None, Generation]:
    """A non-streamed answer of `wire` (one JSON body, read whole): ttft is the end-to-end latency; its text is one
    chunk."""
    try:
        answer = json.loads(content)
    except (ValueError, RecursionError):
        return False, f"the answer is not JSON ({quoted(content)})", NO_ANSWER
    chunks = [elapsed_us] if generated_text(answer, wire) else []
    usage = answer.get("usage") if isinstance(answer, dict) else None
    finish = finish_reason(answer)
    generation = _generation(chunks, usage if isinstance(usage, dict) else None, finish is not None)
    if finish is None:
        return False, f"the answer has no choice with a finish_reason ({quoted(content)})", generation
    if generation.output_tokens < 1:
        return False, "the answer carried no output token", generation
    return True, None, generation


def _generation(chunk_us: list[int], usage: dict[str, Any] | None, finished: bool) -> Generation:
    completion = _count(usage, "completion_tokens")
    prompt = _count(usage, "prompt_tokens")
    return Generation(
        ttft_us=chunk_us[0] if chunk_us else -1,
        input_tokens=prompt if prompt is not None else -1,
        output_tokens=completion if completion is not None else len(chunk_us),
        tokens_counted=completion is None,
        finished=finished,
        chunk_us=chunk_us,
    )


def _count(usage: dict[str, Any] | None, name: str) -> int | None:
    value = usage.get(name) if usage else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None
