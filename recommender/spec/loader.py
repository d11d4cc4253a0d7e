"""`load_spec(path)`: YAML in, a validated ExperimentSpec out, or a SpecError whose problems read
`file: field.path: message` with the closest valid key suggested for a misspelt one."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from recommender.errors import InputError, SpecError
from recommender.files.document import check_binary, load_yaml
from recommender.files.payload_file import PayloadRequest, read_payload_file
from recommender.files.tokenizer import read_tokenizer
from recommender.files.trace import check_replayable, read_trace
from recommender.spec.experiment import ExperimentSpec
from recommender.spec.model import BertArchitecture, ModelSpec
from recommender.spec.target import target_label


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment file; relative model paths resolve against the file's folder, and a model
    file must be there and look like its `source` (a zip archive for torchscript, a protobuf for onnx)."""
    path = Path(path)
    raw = load_yaml(path, "experiment file", SpecError)
    if not isinstance(raw, dict):
        raise SpecError(
            f"{path}: the top level must be a mapping with at least `name:`",
            hint="Start the file with `name: my-experiment`.",
        )
    try:
        spec = ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{path}: {line}" for line in describe_errors(exc, ExperimentSpec)]
        raise SpecError(
            f"{path} is not a valid experiment file",
            problems,
            hint="Fix the fields above; `recommender schema` prints every field with its description.",
        ) from None
    if spec.model.path is not None and not spec.model.path.is_absolute():
        spec = spec.model_copy(
            update={"model": spec.model.model_copy(update={"path": (path.parent / spec.model.path).resolve()})}
        )
    if spec.model.path is not None:
        _check_model_file(spec.model, spec.model.path, path)
    requests = len(spec.payload.texts)  # the packaged texts, or the user's file's requests (counted below)
    if spec.payload.file is not None and not spec.payload.file.is_absolute():
        payload = spec.payload.model_copy(update={"file": (path.parent / spec.payload.file).resolve()})
        spec = spec.model_copy(update={"payload": payload})
    if spec.payload.file is not None:
        requests = _check_payload_file(spec, path)
    if spec.payload.generation is not None:
        spec = _with_local_tokenizer(spec, path)
    if spec.traffic.trace is not None:
        spec = _with_replayable_trace(spec, path, requests)
    correctness = spec.correctness
    outputs = correctness.reference_outputs if correctness != "off" else None
    if correctness != "off" and outputs is not None and not outputs.is_absolute():
        spec = spec.model_copy(
            update={
                "correctness": correctness.model_copy(update={"reference_outputs": (path.parent / outputs).resolve()})
            }
        )
    return spec


# what the first bytes of a model file are, per source (torch.jit.save writes a zip; ONNX opens with ir_version)
MODEL_MAGIC = {
    "torchscript": (b"PK\x03\x04", "a TorchScript file is a zip archive"),
    "onnx": (b"\x08", "an ONNX file is a protobuf opening with its ir_version"),
}


def _check_model_file(model: ModelSpec, model_path: Path, spec_path: Path) -> None:
    magic, looks_like = MODEL_MAGIC[model.source]
    try:
        check_binary(model_path, f"{model.source} model file", SpecError, magic, looks_like)
    except SpecError as exc:
        raise SpecError(
            f"{spec_path} is not a valid experiment file", [f"{spec_path}: model.path: {exc.message}"], hint=exc.hint
        ) from None


def _with_replayable_trace(spec: ExperimentSpec, spec_path: Path, requests: int) -> ExperimentSpec:
    """The trace file resolved against the experiment file's folder, read and checked now: a trace that cannot be
    replayed is refused before anything is stored (files/trace.py names the file and the line); `requests`: how many
    the payload holds (request_token_ids' rows), which a payload index must be below."""
    trace = spec.traffic.trace
    assert trace is not None  # called for a trace only
    if not trace.file.is_absolute():
        trace = trace.model_copy(update={"file": (spec_path.parent / trace.file).resolve()})
        spec = spec.model_copy(update={"traffic": spec.traffic.model_copy(update={"trace": trace})})
    try:
        rows = read_trace(trace.file, SpecError, trace.format)
        # a mooncake trace's row k is sent prompt k, synthesised at its lengths: its payload is its rows
        check_replayable(
            rows, trace.file, trace.speedup, len(rows) if trace.format == "mooncake" else requests, SpecError
        )
    except SpecError as exc:
        raise SpecError(
            f"{spec_path} is not a valid experiment file", [f"{spec_path}: traffic.trace.file: {exc.message}"], exc.hint
        ) from None
    return spec


def _with_local_tokenizer(spec: ExperimentSpec, spec_path: Path) -> ExperimentSpec:
    """payload.generation.tokenizer resolved against the experiment file's folder and read now: a name that is not
    a local folder with a tokenizer.json is refused (nothing is downloaded)."""
    generation = spec.payload.generation
    assert generation is not None  # called for synthetic prompts only
    if generation.tokenizer is None:
        return spec
    folder = generation.tokenizer if generation.tokenizer.is_absolute() else (spec_path.parent / generation.tokenizer)
    try:
        read_tokenizer(folder, SpecError)
    except SpecError as exc:
        raise SpecError(
            f"{spec_path} is not a valid experiment file",
            [f"{spec_path}: payload.generation.tokenizer: {exc.message}"],
            exc.hint,
        ) from None
    generation = generation.model_copy(update={"tokenizer": folder.resolve()})
    return spec.model_copy(update={"payload": spec.payload.model_copy(update={"generation": generation})})


# the vocabulary of the packaged tokenizer (bert-uncased), which a minilm model and a default bert architecture share
TOKENIZER_VOCAB = 30522
MAX_POSITIONS = 512  # the packaged encoders' position embeddings: the most tokens a request can carry


def _check_payload_file(spec: ExperimentSpec, spec_path: Path) -> int:
    """The payload file read as the run will read it: every refusal is the file's line and its fix (exit 2). Returns
    how many requests the run sends (the sample, where one is asked for)."""
    payload = spec.payload
    assert payload.file is not None
    try:
        requests = read_payload_file(payload.file, payload.format, payload.column)
        _check_requests(spec, requests)
        return payload.sample or len(requests)
    except InputError as exc:
        raise SpecError(
            f"{spec_path} is not a valid experiment file", [f"{spec_path}: payload.file: {exc.message}"], hint=exc.hint
        ) from None


def _check_requests(spec: ExperimentSpec, requests: list[PayloadRequest]) -> None:
    payload = spec.payload
    completions = [t for t in spec.all_targets if t.protocol == "openai-completions"]
    chat = next((request for request in requests if request.messages is not None), None)
    if chat is not None and completions:
        raise InputError(
            f"{chat.where}: holds chat `messages`, and target {target_label(completions[0])} speaks "
            "openai-completions, which sends a prompt text",
            hint="Use protocol openai-chat for chat messages, or give that row a `prompt` text.",
        )
    if payload.sample is not None and payload.sample > len(requests):
        raise InputError(
            f"{payload.file}: holds {len(requests):,} requests, fewer than payload.sample ({payload.sample:,})",
            hint=f"Set payload.sample to at most {len(requests):,}, or leave it out to send every request.",
        )
    ids = [(request.where, request.input_ids) for request in requests if request.input_ids is not None]
    if not ids:
        return
    where, longest = max(ids, key=lambda row: len(row[1]))
    limit = payload.sequence_length or MAX_POSITIONS
    if len(longest) > limit:
        raise InputError(
            f"{where}: holds {len(longest)} token ids, more than the {limit} a request carries "
            "(payload.sequence_length)",
            hint=f"Raise payload.sequence_length to {len(longest)} (at most {MAX_POSITIONS}), or shorten that request.",
        )
    vocab = _vocabulary(spec.model)
    where, highest = max(ids, key=lambda row: max(row[1]))
    if vocab is not None and max(highest) >= vocab:
        raise InputError(
            f"{where}: holds the token id {max(highest)}, outside the model's vocabulary (0 to {vocab - 1})",
            hint="Tokenize with the model's tokenizer (bert-uncased), or give the texts instead.",
        )


def _vocabulary(model: ModelSpec) -> int | None:
    """The model's vocabulary size where the spec knows it (your own model file's is not read)."""
    if model.source == "bert" and isinstance(model.architecture, BertArchitecture):
        return model.architecture.vocab_size
    return TOKENIZER_VOCAB if model.source == "minilm" else None


def describe_errors(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One `field.path: message` line per pydantic error; unknown keys get the closest valid key."""
    lines, errors = [], exc.errors()
    mapped = [e for e in errors if not (e["type"] == "bool_type" and isinstance(e.get("input"), dict))]
    for error in mapped or errors:  # a mapping given to a `bool | settings` union: its bool arm's complaint is noise
        loc = [part for part in error["loc"] if not _is_union_tag(part)]
        where = ".".join(str(part) for part in loc) or "(top level)"
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key{_suggestion(root, loc)}")
        else:
            lines.append(f"{where}: {error['msg']}")
    return list(dict.fromkeys(lines))


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and (
        part in ("bool", "DynamicBatching", "CorrectnessSpec", "values", "IntRange") or part.startswith("function-")
    )


def _suggestion(root: type[BaseModel], loc: list[Any]) -> str:
    fields = _fields_at(root, loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.5)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (valid keys: {', '.join(sorted(fields))})" if fields else ""


def _fields_at(model: type[BaseModel], loc: list[Any]) -> list[str]:
    """The field names of the model found by walking `loc` down from `model` (list indices skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return []
        current = _model_in(field.annotation)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _model_in(annotation: Any) -> Any:
    """The first BaseModel class found inside a (possibly nested) type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of experiment files, for editors."""
    return ExperimentSpec.model_json_schema()
