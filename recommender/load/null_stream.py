"""The null endpoint's generative mode: an OpenAI chat / completions stand-in that streams tokens at set delays.

For tests and benchmarks of the Locust child (the one real generative server here is vLLM, slow to start): it answers
`POST <prefix>/chat/completions` and `<prefix>/completions` with server-sent events as vLLM writes them (HTTP/1.1
chunked, `data: {...}` events, a role chunk first for chat, one token per content chunk, the last token's chunk with
`finish_reason: "length"`, a usage chunk when the request asks for it and usage is on, then `data: [DONE]`), or with
one JSON answer when the request does not stream. Each answer holds `tokens` tokens (default: the request's
`max_tokens`), the first after `first_token_ms`, each next after `token_delay_ms`. Prompt tokens are the prompt's
whitespace-separated words. `malformed` breaks every stream one way (no-done, no-finish, bad-json) to test failure
accounting.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

CHAT_PATH, COMPLETIONS_PATH = "/chat/completions", "/completions"
MALFORMED = ("no-done", "no-finish", "bad-json")
_TOKEN = "tok "  # every generated token's text
_DEFAULT_MAX_TOKENS = 16


@dataclass
class GenerationBehaviour:
    """How the stand-in generates: token count (None: the request's max_tokens), delays, usage, a fault."""

    tokens: int | None = None
    first_token_ms: float = 0.0
    token_delay_ms: float = 0.0
    usage: bool = True
    malformed: str = ""
    requests: dict[bytes, dict[str, Any]] = field(default_factory=dict, init=False, repr=False)  # body -> parsed

    def __post_init__(self) -> None:
        if self.malformed and self.malformed not in MALFORMED:
            raise ValueError(f"malformed must be one of {', '.join(MALFORMED)}, not {self.malformed!r}")

    def request(self, body: bytes) -> dict[str, Any]:
        """A request body, parsed once (the load cycles through a few); {} when it is not a JSON object."""
        parsed = self.requests.get(body)
        if parsed is None:
            try:
                loaded = json.loads(body)
            except ValueError:
                loaded = {}
            parsed = loaded if isinstance(loaded, dict) else {}
            if len(self.requests) < 1024:
                self.requests[body] = parsed
        return parsed


def generation_route(path: str) -> str | None:
    """`chat` or `completions` for a generation path (any prefix), else None."""
    if path.endswith(CHAT_PATH):
        return "chat"
    return "completions" if path.endswith(COMPLETIONS_PATH) else None


async def answer_generation(
    writer: asyncio.StreamWriter, route: str, body: bytes, behaviour: GenerationBehaviour
) -> None:
    """Write the whole answer to one generation request (its head included) on a keep-alive connection."""
    request = behaviour.request(body)
    max_tokens = request.get("max_tokens")
    count = behaviour.tokens or (max_tokens if isinstance(max_tokens, int) and max_tokens > 0 else _DEFAULT_MAX_TOKENS)
    usage = {"prompt_tokens": _prompt_words(request), "completion_tokens": count}
    usage["total_tokens"] = usage["prompt_tokens"] + count
    if request.get("stream"):
        wants_usage = bool((request.get("stream_options") or {}).get("include_usage"))
        await _stream(writer, route, count, usage if behaviour.usage and wants_usage else None, behaviour)
        return
    await asyncio.sleep((behaviour.first_token_ms + behaviour.token_delay_ms * (count - 1)) / 1000)
    text = _TOKEN * count
    choice: dict[str, Any] = {"index": 0, "finish_reason": None if behaviour.malformed == "no-finish" else "length"}
    choice |= {"message": {"role": "assistant", "content": text}} if route == "chat" else {"text": text}
    answer: dict[str, Any] = {"id": "null", "object": _OBJECTS[route][0], "choices": [choice]}
    if behaviour.usage:
        answer["usage"] = usage
    content = json.dumps(answer).encode()
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(content)}\r\n\r\n"
    writer.write(head.encode("latin-1") + content)
    await writer.drain()


_OBJECTS = {"chat": ("chat.completion", "chat.completion.chunk"), "completions": ("text_completion", "text_completion")}


async def _stream(
    writer: asyncio.StreamWriter,
    route: str,
    count: int,
    usage: dict[str, int] | None,
    behaviour: GenerationBehaviour,
) -> None:
    head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
    writer.write(head.encode("latin-1"))
    obj = _OBJECTS[route][1]
    if route == "chat":  # vLLM's first chunk: the role, with empty content (not a token)
        _event(writer, {"id": "null", "object": obj, "choices": [_choice(route, "", None, role=True)]})
    await writer.drain()
    for index in range(count):
        await asyncio.sleep((behaviour.first_token_ms if index == 0 else behaviour.token_delay_ms) / 1000)
        last = index == count - 1
        finish = "length" if last and behaviour.malformed != "no-finish" else None
        if last and behaviour.malformed == "bad-json":
            _write_chunk(writer, b'data: {"choices":[{"index":0,"finish_reason":"length",\n\n')
        else:
            _event(writer, {"id": "null", "object": obj, "choices": [_choice(route, _TOKEN, finish)]})
        await writer.drain()
    if usage is not None:
        _event(writer, {"id": "null", "object": obj, "choices": [], "usage": usage})
    if behaviour.malformed != "no-done":
        _write_chunk(writer, b"data: [DONE]\n\n")
    writer.write(b"0\r\n\r\n")
    await writer.drain()


def _choice(route: str, text: str, finish: str | None, role: bool = False) -> dict[str, Any]:
    if route == "chat":
        delta = {"role": "assistant", "content": text} if role else {"content": text}
        return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}


def _event(writer: asyncio.StreamWriter, chunk: dict[str, Any]) -> None:
    _write_chunk(writer, b"data: " + json.dumps(chunk, separators=(",", ":")).encode() + b"\n\n")


def _write_chunk(writer: asyncio.StreamWriter, data: bytes) -> None:
    """One HTTP/1.1 chunk (transfer-encoding: chunked) holding `data`."""
    writer.write(f"{len(data):x}\r\n".encode("latin-1") + data + b"\r\n")


def _prompt_words(request: dict[str, Any]) -> int:
    """The prompt's size as the stand-in counts it: whitespace-separated words of the prompt or the messages."""
    messages = request.get("messages")
    if isinstance(messages, list):
        texts = [m.get("content") for m in messages if isinstance(m, dict)]
        return sum(len(t.split()) for t in texts if isinstance(t, str))
    prompt = request.get("prompt")
    return len(prompt.split()) if isinstance(prompt, str) else 0
