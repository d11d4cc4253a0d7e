"""How requests and answers look on the wire: Triton's KServe v2 JSON, or the OpenAI embeddings API.

Pure strings and plain data, no imports beyond kserve.py: the Locust child gets the path and the answer's key from
its config, the correctness gate and the job build their request bodies here.

    KSERVE.path(model)  -> /v2/models/<model>/infer        (token ids in, "outputs" out)
    openai(prefix).path -> <prefix>/embeddings              (texts in, "data": [{"embedding": [...]}, ...] out)

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
_NUMBER_TYPES = {int, float}  # what json.loads makes of a JSON number
EMBEDDINGS = "/embeddings"


@dataclass(frozen=True)
class Wire:
    """One request format: its name, the path a request is POSTed to, and the key every good answer holds."""

    name: str
    answer_key: str
    prefix: str = ""  # OpenAI: the server's URL prefix (e.g. /v1), "" when the routes are at the root

    def path(self, model: str) -> str:
        return f"{self.prefix}{EMBEDDINGS}" if self.name == OPENAI else kserve.infer_path(model)

    @property
    def takes_text(self) -> bool:
        """The server tokenizes: requests carry the payload's texts, not token ids."""
        return self.name == OPENAI


KSERVE = Wire("kserve", "outputs")


def openai(prefix: str = "") -> Wire:
    return Wire(OPENAI, "data", prefix.rstrip("/"))


def openai_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    """One embeddings request: `input` is always a list (one row per text)."""
    return {"model": model, "input": list(texts)}


def embeddings_of(answer: Any, rows: int) -> list[list[float]]:
    """The embeddings of an OpenAI answer in input order; ValueError saying what is wrong with the answer."""
    return [[float(x) for x in vector] for vector in _vectors(answer, rows)]


def _vectors(answer: Any, rows: int) -> list[list]:
    """An OpenAI answer's embedding lists in input order, checked: `rows` of them, numbers, one width."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != rows:
        found = f"{len(data)} rows" if isinstance(data, list) else f"no `data` list ({_quoted(answer)})"
        raise ValueError(f"expected `data` with {rows} embeddings, got {found}")
    if not all(isinstance(item, dict) for item in data):
        raise ValueError(f"a row of `data` is not an object ({_quoted(data)})")
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
        raise ValueError(f"the rows' `index` values {_quoted(indexes)} are not 0 to {len(data) - 1}, each once")
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
        return f"the answer is not JSON ({_quoted(content.decode('utf-8', 'replace'))})"
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
        return f"expected `outputs` with {rows} rows, got {_quoted(answer)}"
    for output in outputs:
        shape = output.get("shape") if isinstance(output, dict) else None
        if not isinstance(shape, list) or not shape or not all(_is_count(n) for n in shape):
            return f"an output has no shape of whole numbers ({_quoted(output)})"
        name = output.get("name")
        if shape[0] != rows:
            return f"output {name!r} has {shape[0]} rows (shape {shape}), the request asked for {rows}"
        data = output.get("data")
        if data is not None and (not isinstance(data, list) or len(data) != math.prod(shape)):
            found = f"{len(data)} values" if isinstance(data, list) else _quoted(data)
            return f"output {name!r} has shape {shape} and {found}, not {math.prod(shape)} values"
        if data is not None and output.get("datatype") != "BYTES" and not _numbers(data):
            return f"output {name!r} holds values that are not numbers ({_quoted(data)})"
    return None


def _numbers(values: list) -> bool:
    """Every value a JSON number (not a bool): by the set of their types, a few us for thousands of values."""
    return set(map(type, values)) <= _NUMBER_TYPES


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _quoted(value: Any) -> str:
    """A value as a reason quotes it: on one line, at most 120 characters."""
    text = " ".join(str(value).split())
    return f"{text[:120]}..." if len(text) > 120 else text
