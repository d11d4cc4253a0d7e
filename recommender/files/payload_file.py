"""A user's payload file read into requests: each request is a text or a row of token ids, with where it came from.

Formats (`payload.format`, `auto` tells them by the path):

- `jsonl` (.jsonl, .ndjson, .json): one JSON object a line, `{"text": ...}` or `{"input_ids": [...]}` (a request
  body's other shapes, below, are read too); a line holding a SageMaker data-capture record is read as one;
- `text` (.txt): one request a line;
- `csv` (.csv): a header row, then one request a row, its text in the column `payload.column` (default `text`);
- `sagemaker-capture`: SageMaker data-capture JSONL (`captureData.endpointInput`: its data in JSON, base64 or CSV);
- `sample-payloads` (a folder, .tar.gz, .tgz, .tar): one request body a file, as Inference Recommender's
  SamplePayloadUrl holds them.

For a generative endpoint a JSONL line may also be `{"prompt": ...}` (a text) or `{"messages": [{"role": ...,
"content": ...}, ...]}` (OpenAI chat messages, sent as they are), with an optional `output_tokens` (or `max_tokens`,
its OpenAI name): the tokens that request asks the server to generate.

A request body (a sample payload's file, a captured input) is JSON or plain text. JSON: `{"text": ...}`,
`{"input_ids": [...]}`, `{"inputs": "..."}` (Hugging Face), `{"input": "..."}` (OpenAI embeddings), or a KServe v2
body whose `input_ids` tensor is one row (its `attention_mask`, when sent, says which ids are not padding). Every
refusal is an `InputError` naming the file, the line (or member) and the fix: the CLI prints it as one line, exit 2.
Reading goes through files/document.py, which holds the size, count and line caps.
"""

from __future__ import annotations

import base64
import binascii
import csv
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recommender.errors import InputError
from recommender.files.document import Caps, decode_text, read_lines, read_members

KIND = "payload file"
FORMATS = ("auto", "jsonl", "text", "csv", "sagemaker-capture", "sample-payloads")
SUFFIXES = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "jsonl",
    ".txt": "text",
    ".csv": "csv",
    ".tgz": "sample-payloads",
    ".tar": "sample-payloads",
}
DEFAULT_COLUMN = "text"
MAX_PROMPT_TOKENS = 131_072  # the longest context of today's open models: a prompt longer is a typo
MAX_OUTPUT_TOKENS = 32_768  # the most tokens one request may ask a server to generate (its max_tokens)
MAX_PROMPTS_TOKENS = 20_000_000  # synthetic prompts' tokens in all (about 140 MB of text, some 15 s to make)
ROLES = ("system", "developer", "user", "assistant")
_MESSAGES_HINT = (
    'Write the chat as {"messages": [{"role": "user", "content": "..."}]} (roles: ' + ", ".join(ROLES) + ")."
)


@dataclass(frozen=True)
class PayloadRequest:
    """One request of a payload: a text (tokenized later) or the token ids the user gave; `where` names its line."""

    where: str
    text: str | None = None
    input_ids: tuple[int, ...] | None = None
    messages: tuple[tuple[tuple[str, str], ...], ...] | None = None  # chat messages, each its (key, value) pairs
    output_tokens: int | None = None  # a generative request's max_tokens, where the row gives one

    def canonical(self) -> dict[str, Any]:
        """What the request is, without where it was read (the payload's fingerprint hashes these)."""
        if self.messages is not None:
            found: dict[str, Any] = {"messages": self.chat()}
        else:
            found = {"text": self.text} if self.text is not None else {"input_ids": list(self.input_ids or ())}
        return found if self.output_tokens is None else found | {"output_tokens": self.output_tokens}

    def chat(self) -> list[dict[str, str]]:
        """The chat messages as OpenAI takes them (empty for a text or token-id request)."""
        return [dict(message) for message in self.messages or ()]

    def content(self) -> str | None:
        """The request's text: its text, or its messages' contents one a line (an encoder is sent that)."""
        return "\n".join(message["content"] for message in self.chat()) if self.messages is not None else self.text


def payload_format(path: Path, format: str = "auto") -> str:
    """The format of the file at `path`: `format` unless it is `auto`, else told by the path (a folder or a
    .tar.gz is sample payloads)."""
    if format != "auto":
        return format
    name = path.name.lower()
    if path.is_dir() or name.endswith(".tar.gz"):
        return "sample-payloads"
    found = SUFFIXES.get(path.suffix.lower())
    if found is None:
        raise InputError(
            f"{path}: cannot tell a payload file's format from its name",
            hint=f"Set payload.format to one of {', '.join(FORMATS[1:])}, or name the file .jsonl, .txt or .csv.",
        )
    return found


def read_payload_file(
    path: str | Path, format: str = "auto", column: str | None = None, caps: Caps = Caps()
) -> list[PayloadRequest]:
    """Every request of the user's payload file, in the file's order (a folder's or archive's: by member name)."""
    path = Path(path)
    kind = payload_format(path, format)
    if column is not None and kind != "csv":
        raise InputError(
            f"{path}: payload.column names a CSV column, but the file is read as {kind}",
            hint="Leave payload.column out, or set payload.format: csv.",
        )
    if kind == "sample-payloads":
        return [_body_request(data, f"{path}: {name}", name) for name, data in read_members(path, KIND, caps=caps)]
    lines = read_lines(path, KIND, caps=caps)
    if kind == "text":
        return [PayloadRequest(f"{path}: line {number}", text=line) for number, line in lines]
    if kind == "csv":
        return _csv_requests(path, lines, column or DEFAULT_COLUMN)
    return [_json_line(path, number, line, capture_only=kind == "sagemaker-capture") for number, line in lines]


def _json_line(path: Path, number: int, line: str, capture_only: bool) -> PayloadRequest:
    where = f"{path}: line {number}"
    record = _parsed(
        line,
        f"{where}: not valid JSON",
        'JSONL is one JSON object a line, e.g. {"text": "..."} or {"input_ids": [101, 2023, 102]}.',
    )
    if isinstance(record, dict) and "captureData" in record:
        return _capture_request(record, where)
    if capture_only:
        raise InputError(
            f"{where}: is not a SageMaker data-capture record (no captureData)",
            hint="Give the .jsonl files SageMaker's data capture wrote, or set payload.format: jsonl.",
        )
    return _json_request(record, where)


def _json_request(record: Any, where: str) -> PayloadRequest:
    """A request from a JSON value: {"text"}, {"input_ids"}, {"inputs": text}, {"input": text} or KServe v2."""
    if not isinstance(record, dict):
        raise _not_a_request(where, f"a JSON {type(record).__name__}")
    if "messages" in record or "prompt" in record or "output_tokens" in record or "max_tokens" in record:
        return _generative_request(record, where)
    if "input_ids" in record:
        return PayloadRequest(where, input_ids=_token_ids(record["input_ids"], where))
    inputs = record.get("inputs")
    if isinstance(inputs, list) and inputs and all(isinstance(tensor, dict) for tensor in inputs):
        return _kserve_request(inputs, where)
    for key in ("text", "inputs", "input"):
        if key in record:
            return PayloadRequest(where, text=_one_text(record[key], key, where))
    raise _not_a_request(where, f"an object with the keys {', '.join(sorted(map(str, record))) or '(none)'}")


def _generative_request(record: dict, where: str) -> PayloadRequest:
    """A prompt for a generative endpoint: {"prompt": text} or {"messages": [...]}, and an optional output length."""
    output = _output_tokens(record, where)
    if "messages" in record and "prompt" in record:
        raise InputError(f"{where}: holds both `prompt` and `messages`", hint="Give one of them a line.")
    if "messages" in record:
        return PayloadRequest(where, messages=_messages(record["messages"], where), output_tokens=output)
    for key in ("prompt", "text", "inputs", "input"):
        if key in record:
            return PayloadRequest(where, text=_one_text(record[key], key, where), output_tokens=output)
    raise InputError(
        f"{where}: gives an output length and no prompt",
        hint='Add the prompt, e.g. {"prompt": "...", "output_tokens": 128}.',
    )


def _output_tokens(record: dict, where: str) -> int | None:
    given = [key for key in ("output_tokens", "max_tokens") if key in record]
    if len(given) > 1:
        raise InputError(
            f"{where}: holds both `output_tokens` and `max_tokens`", hint="Give one of them (they mean the same)."
        )
    if not given:
        return None
    value = record[given[0]]
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= MAX_OUTPUT_TOKENS:
        raise InputError(
            f"{where}: `{given[0]}` is {json.dumps(value)[:40]}, not a whole number of tokens from 1 to "
            f"{MAX_OUTPUT_TOKENS:,}",
            hint="Give how many tokens the server generates for this prompt, e.g. 128.",
        )
    return value


def _messages(value: Any, where: str) -> tuple[tuple[tuple[str, str], ...], ...]:
    if not isinstance(value, list) or not value:
        raise InputError(f"{where}: `messages` is not a non-empty list of chat messages", hint=_MESSAGES_HINT)
    return tuple(_message(message, where, index) for index, message in enumerate(value))


def _message(message: Any, where: str, index: int) -> tuple[tuple[str, str], ...]:
    at = f"{where}: messages[{index}]"
    if not isinstance(message, dict) or set(message) - {"role", "content", "name"}:
        found = f"a JSON {type(message).__name__}" if not isinstance(message, dict) else f"keys {sorted(message)}"
        raise InputError(f"{at}: is {found}, not a message of role and content", hint=_MESSAGES_HINT)
    if message.get("role") not in ROLES:
        raise InputError(
            f"{at}: role {json.dumps(message.get('role'))[:40]} is not one of {', '.join(ROLES)}", _MESSAGES_HINT
        )
    content = message.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InputError(f"{at}: `content` is not a non-empty text", hint=_MESSAGES_HINT)
    return tuple((key, str(message[key])) for key in ("role", "content", "name") if key in message)


def _one_text(value: Any, key: str, where: str) -> str:
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, list):
        raise InputError(
            f"{where}: `{key}` holds {len(value)} texts; a request here is one text",
            hint="Write one request a line (or a file), each with one text.",
        )
    if not isinstance(value, str) or not value.strip():
        raise InputError(
            f"{where}: `{key}` is {'empty' if isinstance(value, str) else f'a {type(value).__name__}'}, not a text",
            hint="Give each request a non-empty text, or leave the line out.",
        )
    return value


def _token_ids(value: Any, where: str) -> tuple[int, ...]:
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value)
    ):
        raise InputError(
            f"{where}: `input_ids` is not a non-empty list of token ids (integers from 0)",
            hint='Write the ids as a JSON list, e.g. {"input_ids": [101, 2023, 102]}, or give the text instead.',
        )
    return tuple(value)


def _kserve_request(inputs: list[dict], where: str) -> PayloadRequest:
    tensors = {str(tensor.get("name")): tensor for tensor in inputs}
    ids_tensor = tensors.get("input_ids")
    if ids_tensor is None:
        raise _not_a_request(where, f"a KServe v2 body without an input_ids tensor ({', '.join(map(str, tensors))})")
    shape = ids_tensor.get("shape")
    if isinstance(shape, list) and len(shape) == 2 and shape[0] != 1:
        raise InputError(
            f"{where}: the KServe v2 body is a batch of {shape[0]} rows; a request here is one row",
            hint="Give one request a body (shape [1, n]); the search tries batching itself.",
        )
    ids = _token_ids(_flat(ids_tensor.get("data")), where)
    mask = tensors.get("attention_mask")
    if mask is not None:
        values = _flat(mask.get("data"))
        if not isinstance(values, list) or not all(value in (0, 1) for value in values):
            raise InputError(
                f"{where}: the KServe v2 body's attention_mask is not a list of 0 and 1",
                hint="Send the mask the model takes (1 for a token, 0 for padding), or leave it out.",
            )
        ids = ids[: sum(values) or len(ids)]
    return PayloadRequest(where, input_ids=ids)


def _flat(data: Any) -> Any:
    if isinstance(data, list) and data and all(isinstance(row, list) for row in data):
        return [value for row in data for value in row]
    return data


def _capture_request(record: dict, where: str) -> PayloadRequest:
    """The request a SageMaker data-capture record holds (captureData.endpointInput)."""
    captured = record["captureData"]
    endpoint_input = captured.get("endpointInput") if isinstance(captured, dict) else None
    if not isinstance(endpoint_input, dict) or not isinstance(endpoint_input.get("data"), str):
        raise InputError(
            f"{where}: the data-capture record has no captureData.endpointInput.data",
            hint="Capture the endpoint's input (DataCaptureConfig CaptureOptions: Input), then give those files.",
        )
    data, encoding = endpoint_input["data"], str(endpoint_input.get("encoding", "JSON")).upper()
    content_type = str(endpoint_input.get("observedContentType", ""))
    if encoding == "BASE64":
        try:
            body = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise InputError(
                f"{where}: captureData.endpointInput.data is not valid base64 (its encoding says BASE64)",
                hint="Give the capture files as SageMaker wrote them.",
            ) from None
        return _body_request(body, where, content_type=content_type)
    if encoding == "CSV" or "csv" in content_type or "text" in content_type:
        return PayloadRequest(where, text=_one_text(data, "captureData.endpointInput.data", where))
    return _body_request(data.encode(), where, content_type="application/json")


def _parsed(text: str, problem: str, hint: str) -> Any:
    """`text` as JSON, or one line: `problem` and why (json's message, or too deeply nested)."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InputError(f"{problem} ({getattr(exc, 'msg', 'nested too deep')})", hint=hint) from None


def _body_request(data: bytes, where: str, name: str = "", content_type: str = "") -> PayloadRequest:
    """One request body: JSON when its content type or name says so (or it opens with `{`), else plain text."""
    text = decode_text(data, where, "request body")
    is_json = "json" in content_type or name.lower().endswith(".json") or text.lstrip().startswith("{")
    if not is_json:
        return PayloadRequest(where, text=_one_text(text.strip(), "the body", where))
    record = _parsed(
        text,
        f"{where}: the request body is not valid JSON",
        'A JSON body is one object, e.g. {"inputs": "..."}; a plain-text body is the text itself.',
    )
    return _json_request(record, where)


def _csv_requests(path: Path, lines: list[tuple[int, str]], column: str) -> list[PayloadRequest]:
    """One request a record under the header; a quoted text may span lines, and a record is named by its first."""
    numbers = [number for number, _ in lines]
    reader = csv.reader((line + "\n" for _, line in lines), strict=True)
    try:
        header = [name.strip() for name in next(reader)]
        records = []
        first = reader.line_num  # lines consumed so far: the next record starts on the line after
        for row in reader:
            records.append((numbers[first], row))
            first = reader.line_num
    except csv.Error as exc:
        raise InputError(
            f"{path}: line {numbers[min(reader.line_num, len(numbers)) - 1]}: not valid CSV ({exc})",
            hint="Check the quotes on that row (a text holding commas or quotes is quoted, its quotes doubled).",
        ) from None
    if column not in header:
        raise InputError(
            f"{path}: line {numbers[0]}: the header has no column `{column}` (it has {', '.join(header) or 'none'})",
            hint="Set payload.column to the column holding the texts (the first row is the header).",
        )
    if not records:
        raise InputError(f"{path}: holds a header and no requests", hint="Add one request a row under the header.")
    index = header.index(column)
    return [_csv_request(path, number, row, column, index) for number, row in records]


def _csv_request(path: Path, number: int, row: list[str], column: str, index: int) -> PayloadRequest:
    where = f"{path}: line {number}"
    if index >= len(row):
        raise InputError(
            f"{where}: has {len(row)} columns; `{column}` is column {index + 1}",
            hint="Give every row the header's columns (quote a text that holds commas).",
        )
    return PayloadRequest(where, text=_one_text(row[index], column, where))


def _not_a_request(where: str, found: str) -> InputError:
    return InputError(
        f"{where}: is {found}, not a request",
        hint='Give each request as {"text": "..."} or {"input_ids": [...]} (or a body Inference Recommender takes).',
    )
