"""How requests and answers look on the wire: Triton's KServe v2 JSON, the OpenAI embeddings API, or OpenAI's
generation APIs (chat and completions, streamed as server-sent events by default).

Pure strings and plain data, no imports beyond kserve.py: the Locust child gets the path, the answer's key and the
wire's name from its config, the correctness gate and the job build their request bodies here.

    KSERVE.path(model)  -> /v2/models/<model>/infer        (token ids in, "outputs" out)
    openai(prefix).path -> <prefix>/embeddings              (texts in, "data": [{"embedding": [...]}, ...] out)
    openai(prefix, OPENAI_CHAT).path        -> <prefix>/chat/completions  (messages in, tokens streamed out)
    openai(prefix, OPENAI_COMPLETIONS).path -> <prefix>/completions       (a prompt in, tokens streamed out)
    generation_body(wire, model, prompt, max_tokens) -> a chat or completions request (max_tokens, ignore_eos pinned)

An answer is checked by its shape, the one way for the load and the gate: `answer_problem(answer_key, content, rows)`
is None only for an answer with the rows its request asked for (`rows_asked(body)`), else its one-line reason;
`embeddings_of` reads an OpenAI answer's rows (each an `index` from 0 to rows - 1 once, or none at all; one width).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recommender.targets import kserve

OPENAI = "openai"
OPENAI_CHAT = "openai-chat"
OPENAI_COMPLETIONS = "openai-completions"
GENERATIVE = (OPENAI_CHAT, OPENAI_COMPLETIONS)  # the wires whose answers are generated tokens, streamed by default
OPENAI_WIRES = (OPENAI, *GENERATIVE)
_NUMBER_TYPES = {int, float}  # what json.loads makes of a JSON number
EMBEDDINGS = "/embeddings"
# each OpenAI wire's route under the server's prefix, and the key of the choices' text a streamed chunk carries
_OPENAI_PATHS = {OPENAI: EMBEDDINGS, OPENAI_CHAT: "/chat/completions", OPENAI_COMPLETIONS: "/completions"}
CONTENT_KEYS = {OPENAI_CHAT: "content", OPENAI_COMPLETIONS: "text"}  # chat: delta.content; completions: text


@dataclass(frozen=True)
class Wire:
    """One request format: its name, the path a request is POSTed to, and the key every good answer holds."""

    name: str
    answer_key: str
    prefix: str = ""  # OpenAI: the server's URL prefix (e.g. /v1), "" when the routes are at the root
    stream: bool = True  # generative wires: the answer streamed as server-sent events (False: one JSON answer)

    def path(self, model: str) -> str:
        return f"{self.prefix}{_OPENAI_PATHS[self.name]}" if self.name in OPENAI_WIRES else kserve.infer_path(model)

    @property
    def takes_text(self) -> bool:
        """The server tokenizes: requests carry the payload's texts, not token ids."""
        return self.name in OPENAI_WIRES

    @property
    def generative(self) -> bool:
        """The answer is generated tokens (chat or completions): read per chunk, measured per token."""
        return self.name in GENERATIVE


KSERVE = Wire("kserve", "outputs")


def openai(prefix: str = "", name: str = OPENAI, stream: bool = True) -> Wire:
    """An OpenAI-compatible wire: embeddings (`data` out) or a generative one (`choices` out)."""
    if name not in OPENAI_WIRES:
        raise ValueError(f"unknown OpenAI wire {name!r}: one of {', '.join(OPENAI_WIRES)}")
    return Wire(name, "data" if name == OPENAI else "choices", prefix.rstrip("/"), stream)


def openai_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    """One embeddings request: `input` is always a list (one row per text)."""
    return {"model": model, "input": list(texts)}


def generation_body(
    wire: Wire, model: str, prompt: str | Sequence[dict[str, Any]], max_tokens: int, stream: bool = True
) -> dict[str, Any]:
    """One generation request: chat sends `messages` (a text becomes one user message), completions a `prompt` text.
    `max_tokens` and `ignore_eos` are pinned so that the answer is as long as asked; a streamed request asks for the
    token counts in a last chunk (`stream_options.include_usage`: OpenAI and vLLM refuse it on a request that does
    not stream)."""
    if not wire.generative:
        raise ValueError(f"wire {wire.name!r} does not generate: no generation body")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be a whole number of at least 1, not {max_tokens!r}")
    body: dict[str, Any] = {"model": model}
    if wire.name == OPENAI_CHAT:
        body["messages"] = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    elif isinstance(prompt, str):
        body["prompt"] = prompt
    else:
        raise ValueError("protocol openai-completions sends a prompt text, not chat messages (use openai-chat)")
    body |= {"max_tokens": max_tokens, "ignore_eos": True, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    return body


def first_choice(answer: Any) -> dict[str, Any]:
    """A generation answer's (or chunk's) first choice; {} when it has none."""
    choices = answer.get("choices") if isinstance(answer, dict) else None
    first = choices[0] if isinstance(choices, list) and choices else None
    return first if isinstance(first, dict) else {}


def finish_reason(answer: Any) -> str | None:
    """The first choice's finish_reason (None: not finished, or no choice)."""
    finish = first_choice(answer).get("finish_reason")
    return str(finish) if finish is not None else None


def generated_text(answer: Any, name: str) -> str:
    """A non-streamed generation answer's text: chat's `message.content`, completions' `text` ("" when none)."""
    choice = first_choice(answer)
    text = choice.get("message") if name == OPENAI_CHAT else choice
    value = text.get(CONTENT_KEYS[name]) if isinstance(text, dict) else None
    return value if isinstance(value, str) else ""


def generation_problem(answer: Any, name: str) -> str | None:
    """None for a good non-streamed generation answer (a choice with a finish_reason and some text), else what is
    wrong, one line."""
    if finish_reason(answer) is None:
        return f"the answer has no choice with a finish_reason ({quoted(answer)})"
    if not generated_text(answer, name):
        return f"the answer's choice holds no generated text ({quoted(answer)})"
    return None


def embeddings_of(answer: Any, rows: int) -> list[list[float]]:
    """The embeddings of an OpenAI answer in input order; ValueError saying what is wrong with the answer."""
    return [[float(x) for x in vector] for vector in _vectors(answer, rows)]


def _vectors(answer: Any, rows: int) -> list[list]:
    """An OpenAI answer's embedding lists in input order, checked: `rows` of them, numbers, one width."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != rows:
        found = f"{len(data)} rows" if isinstance(data, list) else f"no `data` list ({quoted(answer)})"
        raise ValueError(f"expected `data` with {rows} embeddings, got {found}")
    if not all(isinstance(item, dict) for item in data):
        raise ValueError(f"a row of `data` is not an object ({quoted(data)})")
    vectors = [item.get("embedding") for item in _in_input_order(data)]
    if not all(isinstance(v, list) and v and _numbers(v) for v in vectors):
        raise ValueError("a row of `data` has no `embedding` list of numbers (base64 answers are not read)")
    widths = sorted({len(v) for v in vectors})  # type: ignore[arg-type]
    if len(widths) > 1:
        raise ValueError(f"the rows of `data` are ragged: embeddings of {', '.join(map(str, widths))} numbers")
    return vectors  # type: ignore[return-value]


def _in_input_order(data: list[dict]) -> list[dict]:
    """The rows by their `index` (each of 0 .. rows - 1 once), or as they came when no row has one."""
    indexes = [item.get("index") for item in data]
    if all(index is None for index in indexes):
        return data
    if sorted(i if isinstance(i, int) and not isinstance(i, bool) else -1 for i in indexes) != list(range(len(data))):
        raise ValueError(f"the rows' `index` values {quoted(indexes)} are not 0 to {len(data) - 1}, each once")
    return sorted(data, key=lambda item: item["index"])


def rows_asked(body: Any) -> int:
    """How many rows a request body asks for: an OpenAI body's texts, a KServe body's first input's first
    dimension (the batch); 1 when the body does not say (a body the load sends is one the job built)."""
    if isinstance(body, dict) and isinstance(body.get("input"), list):
        return len(body["input"])
    inputs = body.get("inputs") if isinstance(body, dict) else None
    shape = inputs[0].get("shape") if isinstance(inputs, list) and inputs and isinstance(inputs[0], dict) else None
    return shape[0] if isinstance(shape, list) and shape and _is_count(shape[0]) else 1


def answer_problem(answer_key: str, content: bytes, rows: int) -> str | None:
    """None when `content` (an HTTP 200 answer's body) is a good answer of `rows` rows, else what is wrong, one line:
    OpenAI (`answer_key` "data"): `rows` embeddings of one width; KServe ("outputs"): outputs whose shape starts with
    `rows` and whose data has as many values as the shape says."""
    try:
        answer = json.loads(content)
    except (ValueError, RecursionError):
        return f"the answer is not JSON ({quoted(content.decode('utf-8', 'replace'))})"
    if answer_key == "data":
        try:
            _vectors(answer, rows)
        except ValueError as error:
            return str(error)
        return None
    return _kserve_problem(answer, rows)


def _kserve_problem(answer: Any, rows: int) -> str | None:
    outputs = answer.get("outputs") if isinstance(answer, dict) else None
    if not isinstance(outputs, list) or not outputs:
        return f"expected `outputs` with {rows} rows, got {quoted(answer)}"
    for output in outputs:
        shape = output.get("shape") if isinstance(output, dict) else None
        if not isinstance(shape, list) or not shape or not all(_is_count(n) for n in shape):
            return f"an output has no shape of whole numbers ({quoted(output)})"
        name = output.get("name")
        if shape[0] != rows:
            return f"output {name!r} has {shape[0]} rows (shape {shape}), the request asked for {rows}"
        data = output.get("data")
        if data is not None and (not isinstance(data, list) or len(data) != math.prod(shape)):
            found = f"{len(data)} values" if isinstance(data, list) else quoted(data)
            return f"output {name!r} has shape {shape} and {found}, not {math.prod(shape)} values"
        if data is not None and output.get("datatype") != "BYTES" and not _numbers(data):
            return f"output {name!r} holds values that are not numbers ({quoted(data)})"
    return None


def _numbers(values: list) -> bool:
    """Every value a JSON number (not a bool): by the set of their types, a few us for thousands of values."""
    return set(map(type, values)) <= _NUMBER_TYPES


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def quoted(value: Any) -> str:
    """A value as a reason quotes it (bytes decoded): on one line, at most 120 characters."""
    text = " ".join((value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)).split())
    return f"{text[:120]}..." if len(text) > 120 else text
