"""A user's document: the one reader for every file a user names (experiment YAML, job request JSON, price
YAML, a file holding a database URL) and the checks for a binary file they name (a model file).

Whatever the file is (missing, a directory, a device, unreadable, over the size cap, binary, not UTF-8, not
valid YAML/JSON, nested too deep, an alias bomb), the caller gets its own `InputError` subclass naming the
file, the reason and a hint; never a traceback. Limits:

- MAX_BYTES (10 MiB): a document is read up to this size; real experiment, job and price files are a few KiB.
  A record log (JSON Lines, one line per request: AIPerf's profile_export.jsonl) is read up to MAX_RECORDS_BYTES
  (1 GiB), each line held to the limits below.
- MAX_DEPTH (64 levels) and MAX_VALUES (1,000,000 values after YAML aliases are expanded): a document past
  either is refused before anything walks it (PyYAML's composer and every validator recurse; a few aliases
  can stand for billions of values).
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from recommender.errors import InputError

MAX_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 1_000_000
MAX_RECORDS_BYTES = 1024 * 1024 * 1024  # a record log (one JSON line per request, ~1.5 KB each): ~700,000 requests


def read_text(
    path: str | Path, kind: str, error: type[InputError] = InputError, limit: int = MAX_BYTES, hint: str | None = None
) -> str:
    """The file's text (UTF-8, a leading BOM dropped); `kind` names it in messages ("experiment file"); `limit`: its
    size cap (a record log's is MAX_RECORDS_BYTES), `hint` what to do about a file over it."""
    path = Path(path)
    with _open(path, kind, error) as handle:
        data = _read_capped(handle, path, kind, error, limit, hint)
    if b"\x00" in data:
        raise error(
            f"{path}: is binary (it holds NUL bytes), not {_a(kind)}",
            hint=f"{_a(kind).capitalize()} is UTF-8 text; is this the right file?",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{path}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="Save the file as UTF-8 (most editors offer this in 'Save as').",
        ) from None


def load_yaml(path: str | Path, kind: str, error: type[InputError] = InputError) -> Any:
    """The file parsed as one YAML document (safe tags only), within MAX_DEPTH and MAX_VALUES."""
    path = Path(path)
    text = read_text(path, kind, error)
    try:
        document = yaml.load(text, Loader=_DepthLimitedLoader)
    except _TooDeep as exc:
        raise _too_deep(path, error, _where(exc)) from None
    except yaml.YAMLError as exc:
        raise error(
            f"{path}: {_where(exc)}not valid YAML ({getattr(exc, 'problem', None) or exc})",
            hint="Check indentation and quoting around that line.",
        ) from None
    return _checked_shape(document, path, error)


def load_json(path: str | Path, kind: str, error: type[InputError] = InputError) -> Any:
    """The file parsed as JSON, within MAX_DEPTH and MAX_VALUES."""
    path = Path(path)
    return _parsed_json(read_text(path, kind, error), path, error)


def load_json_lines(path: str | Path, kind: str, error: type[InputError] = InputError) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON Lines record log (one record per request), each line
    held to what load_json holds a file to; the file within MAX_RECORDS_BYTES."""
    path = Path(path)
    text = read_text(path, kind, error, MAX_RECORDS_BYTES, "A record log is about 1.5 KB a request.")
    for number, line in enumerate(text.split("\n"), start=1):
        if line.strip():
            yield number, _parsed_json(line, path, error, number)


def _parsed_json(text: str, path: Path, error: type[InputError], line: int | None = None) -> Any:
    """`text` parsed as JSON, within MAX_DEPTH and MAX_VALUES; `line`: the file's line that `text` is."""
    where = f"line {line}, " if line is not None else ""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise error(
            f"{path}: {where or f'line {exc.lineno}, '}column {exc.colno}: not valid JSON ({exc.msg})",
            hint="Check the brackets, commas and quotes around that line.",
        ) from None
    except RecursionError:
        raise _too_deep(path, error, where.replace(", ", ": ")) from None
    return _checked_shape(document, path, error, where.replace(", ", ": "))


def check_binary(path: str | Path, kind: str, error: type[InputError], magic: bytes, looks_like: str) -> Path:
    """A readable regular file whose first bytes are `magic` (a model file: no size cap, never read whole)."""
    path = Path(path)
    with _open(path, kind, error) as handle:
        head = handle.read(len(magic))
    if head != magic:
        found = "it is empty" if not head else f"it starts with {head!r}"
        raise error(
            f"{path}: is not {_a(kind)} ({found}; {looks_like})",
            hint="Check that the path names the exported model, not another file.",
        )
    return path


def _open(path: Path, kind: str, error: type[InputError]) -> BinaryIO:
    """Open for reading, refusing what is not a regular file before a read could block or never end."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise error(
            f"{path}: no such {kind}", hint=f"Check the path; a relative path starts from {Path.cwd()}."
        ) from None
    except OSError as exc:
        raise _unreadable(path, exc, error) from None
    if stat.S_ISDIR(mode):
        raise error(f"{path}: is a directory, not {_a(kind)}", hint=f"Name the {kind} inside it.")
    if not stat.S_ISREG(mode):
        raise error(
            f"{path}: is not a regular file (a device, pipe or socket), not {_a(kind)}",
            hint=f"Give the path of the {kind} itself.",
        )
    try:
        return open(path, "rb")
    except OSError as exc:
        raise _unreadable(path, exc, error) from None


def _read_capped(
    handle: BinaryIO,
    path: Path,
    kind: str,
    error: type[InputError],
    limit: int = MAX_BYTES,
    hint: str | None = None,
) -> bytes:
    size = os.fstat(handle.fileno()).st_size
    try:
        data = handle.read(limit + 1) if size <= limit else b""
    except OSError as exc:
        raise _unreadable(path, exc, error) from None
    if size > limit or len(data) > limit:
        raise error(
            f"{path}: is {max(size, len(data)):,} bytes, over the {_mib(limit)} limit for {_a(kind)}",
            hint=hint or f"{_a(kind).capitalize()} is a few KiB; is this the right file?",
        )
    return data


def _mib(size: int) -> str:
    return f"{size / (1024 * 1024):g} MiB" if size >= 1024 * 1024 else f"{size / 1024:g} KiB"


def _a(kind: str) -> str:
    return f"{'an' if kind[:1] in 'aeiou' else 'a'} {kind}"


def _unreadable(path: Path, exc: OSError, error: type[InputError]) -> InputError:
    return error(
        f"{path}: cannot be read ({exc.strerror or exc})",
        hint="Check the file's permissions (and its folders') for the user running recommender.",
    )


def _too_deep(path: Path, error: type[InputError], where: str = "") -> InputError:
    return error(
        f"{path}: {where}is nested more than {MAX_DEPTH} levels deep (or refers to itself through a YAML alias)",
        hint="Real experiment, job and price files are a few levels deep; is this the right file?",
    )


class _TooDeep(yaml.YAMLError):
    def __init__(self, mark: Any) -> None:
        super().__init__(f"nested more than {MAX_DEPTH} levels deep")
        self.problem_mark = mark


class _DepthLimitedLoader(yaml.SafeLoader):
    """PyYAML's safe loader refusing nesting past MAX_DEPTH while composing (its composer recurses)."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise _TooDeep(self.peek_event().start_mark)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def _where(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None)
    return f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""


def _checked_shape(document: Any, path: Path, error: type[InputError], where: str = "") -> Any:
    """Walk the document once, without recursion, counting values as a validator would see them (aliases
    expanded); refuse it past MAX_DEPTH (a self-referring alias never ends) or MAX_VALUES (an alias bomb)."""
    pending, seen = [(document, 1)], 0
    while pending:
        value, depth = pending.pop()
        seen += 1
        if depth > MAX_DEPTH:
            raise _too_deep(path, error, where)
        if seen > MAX_VALUES:
            raise error(
                f"{path}: {where}holds more than {MAX_VALUES:,} values (counting what YAML aliases repeat)",
                hint="Repeated YAML aliases (&anchor / *alias) multiply a document's size; write it out plainly.",
            )
        children = (
            (*value.keys(), *value.values()) if isinstance(value, dict) else value if isinstance(value, list) else ()
        )
        pending.extend((child, depth + 1) for child in children)
    return document
