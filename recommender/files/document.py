"""A user's document: the one reader for every file a user names (experiment YAML, job request JSON, price
YAML, a file holding a database URL, a payload file of requests and the folder or .tar.gz of request bodies) and
the checks for a binary file they name (a model file).

Whatever the file is (missing, a directory, a device, unreadable, over the size cap, binary, not UTF-8, not
valid YAML/JSON, nested too deep, an alias bomb), the caller gets its own `InputError` subclass naming the
file, the reason and a hint; never a traceback. Limits:

- MAX_BYTES (10 MiB): a document is read up to this size; real experiment, job and price files are a few KiB.
  A record log (JSON Lines, one line per request: AIPerf's profile_export.jsonl) is read up to MAX_RECORDS_BYTES
  (1 GiB), each line held to the limits below.
- MAX_DEPTH (64 levels) and MAX_VALUES (1,000,000 values after YAML aliases are expanded): a document past
  either is refused before anything walks it (PyYAML's composer and every validator recurse; a few aliases
  can stand for billions of values).
- A file of records (`read_lines`: a payload of requests, one a line) may be up to `Caps.bytes` (64 MiB by default),
  with at most `Caps.records` records and `Caps.line_bytes` per line; a folder or archive of files (`read_members`)
  as many entries (counted as they are walked, folders too), each file up to `Caps.line_bytes`, all together up to
  `Caps.bytes` (counted as they are unpacked, so a compressed bomb stops at the cap; an archive's own bytes are held
  to it too). An over-long or undecodable line is named by its number, a member by its name.
"""

from __future__ import annotations

import io
import json
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import yaml

from recommender.errors import InputError

MAX_BYTES = 10 * 1024 * 1024
MAX_DEPTH = 64
MAX_VALUES = 1_000_000
MAX_RECORDS_BYTES = 1024 * 1024 * 1024  # a record log (one JSON line per request, ~1.5 KB each): ~700,000 requests
_SAMPLE_HINT = "Keep a sample of the file (a few thousand requests describe the traffic)."


@dataclass(frozen=True)
class Caps:
    """The limits of a file of records (or a folder or archive of them): its bytes, its records, one record's bytes."""

    bytes: int = 64 * 1024 * 1024
    records: int = 100_000
    line_bytes: int = 1024 * 1024

    def describe_bytes(self) -> str:
        return _mib(self.bytes)


def read_text(
    path: str | Path, kind: str, error: type[InputError] = InputError, limit: int = MAX_BYTES, hint: str | None = None
) -> str:
    """The file's text (UTF-8, a leading BOM dropped); `kind` names it in messages ("experiment file"); `limit`: its
    size cap (a record log's is MAX_RECORDS_BYTES), `hint` what to do about a file over it."""
    path = Path(path)
    with _open(path, kind, error) as handle:
        data = _read_capped(handle, path, kind, error, limit, hint)
    return decode_text(data, str(path), kind, error)


def decode_text(data: bytes, where: str, kind: str, error: type[InputError] = InputError) -> str:
    """`data` as UTF-8 text (a leading BOM dropped); `where` names it in messages (a path, or a path and a member),
    an undecodable byte by its line and offset."""
    if b"\x00" in data:
        nul = data.index(b"\x00")
        raise error(
            f"{where}: line {_line_of(data, nul)}: is binary (it holds NUL bytes), not {_a(kind)}",
            hint=f"{_a(kind).capitalize()} is UTF-8 text; is this the right file?",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{where}: line {_line_of(data, exc.start)}: is not UTF-8 text "
            f"(byte 0x{data[exc.start]:02x} at offset {exc.start})",
            hint="Save the file as UTF-8 (most editors offer this in 'Save as').",
        ) from None


def read_lines(
    path: str | Path, kind: str, error: type[InputError] = InputError, caps: Caps = Caps()
) -> list[tuple[int, str]]:
    """The file's non-blank lines with their numbers (from 1), within `caps`: the file's size, the count of
    non-blank lines, one line's bytes. An empty file (or one of blank lines only) is refused."""
    path = Path(path)
    with _open(path, kind, error) as handle:
        data = _read_capped(handle, path, kind, error, caps.bytes, _SAMPLE_HINT)
    lines = []
    for number, raw in enumerate(data.split(b"\n"), start=1):
        if len(raw) > caps.line_bytes:
            raise error(
                f"{path}: line {number}: is {len(raw):,} bytes, over the {_mib(caps.line_bytes)} limit for one line "
                f"of {_a(kind)}",
                hint="One request is one line; is a line break missing, or is this the right file?",
            )
        if raw.strip():
            lines.append((number, raw))
            if len(lines) > caps.records:
                raise _too_many(path, kind, error, caps, f"line {number}: ")
    if not lines:
        raise _empty(path, kind, error)
    text = decode_text(data, str(path), kind, error)  # undecodable bytes named by their line
    split = text.split("\n")
    return [(number, split[number - 1].rstrip("\r")) for number, _ in lines]


def read_members(
    path: str | Path, kind: str, error: type[InputError] = InputError, caps: Caps = Caps()
) -> list[tuple[str, bytes]]:
    """The regular files of a folder (not recursing into subfolders' links) or of a .tar.gz / .tgz / .tar archive,
    as (name, bytes) sorted by name, within `caps`: their count, one member's bytes, all members' bytes together
    (counted as they are unpacked). Nothing is extracted to disk; links and devices are refused by name."""
    path = Path(path)
    mode = _mode(path, kind, error)
    read = _folder_members if stat.S_ISDIR(mode) else _archive_members
    members = read(path, kind, error, caps)
    if not members:
        raise _empty(path, kind, error)
    return sorted(members)


def _folder_members(path: Path, kind: str, error: type[InputError], caps: Caps) -> list[tuple[str, bytes]]:
    """Walked in name order and stopped at the caps as it goes (a folder as big as a disk is refused, not listed);
    hidden entries (a leading dot) are skipped, links refused, subfolders entered."""
    members: list[tuple[str, bytes]] = []
    total = seen = 0
    for folder, subfolders, files in os.walk(path):
        subfolders[:] = sorted(name for name in subfolders if not name.startswith("."))
        for name in [*subfolders, *sorted(files)]:
            seen += 1
            if seen > caps.records:
                raise _too_many(path, kind, error, caps, "")
            member = Path(folder) / name
            relative = str(member.relative_to(path))
            if member.is_symlink() or not (member.is_file() or member.is_dir()):
                raise error(
                    f"{path}: {relative}: is a link or a special file, not a request body",
                    hint=f"Put only the request bodies (regular files) in the {kind}.",
                )
            if member.is_dir() or name.startswith("."):
                continue
            with _open(member, kind, error) as handle:
                data = _read_capped(handle, member, kind, error, caps.line_bytes, "One file is one request body.")
            total += len(data)
            members.append((relative, data))
            _check_members(path, kind, error, caps, len(members), total)
    return members


def _archive_members(path: Path, kind: str, error: type[InputError], caps: Caps) -> list[tuple[str, bytes]]:
    members: list[tuple[str, bytes]] = []
    total = 0
    with _open(path, kind, error) as handle:
        packed = _read_capped(handle, path, kind, error, caps.bytes, _SAMPLE_HINT)
    try:
        with tarfile.open(fileobj=io.BytesIO(packed), mode="r:*") as archive:
            for seen, info in enumerate(archive, start=1):
                if seen > caps.records:  # folders and links count as they are read: the walk stops at the cap
                    raise _too_many(path, kind, error, caps, "")
                data = _archive_member(archive, info, path, kind, error, caps)
                if data is not None:
                    total += len(data)
                    members.append((info.name.removeprefix("./"), data))
                    _check_members(path, kind, error, caps, len(members), total)
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        raise error(
            f"{path}: is neither a folder nor a readable .tar.gz / .tar archive ({exc})",
            hint="Give a folder of request bodies or a .tar.gz of them (`tar czf payload.tar.gz -C folder .`).",
        ) from None
    return members


def _archive_member(
    archive: tarfile.TarFile, info: tarfile.TarInfo, path: Path, kind: str, error: type[InputError], caps: Caps
) -> bytes | None:
    name = info.name.removeprefix("./")
    if info.isdir() or not name or name.startswith(".") or "/." in name:
        return None
    if not info.isfile():
        raise error(
            f"{path}: {name}: is a link or a special file, not a request body",
            hint=f"Put only the request bodies (regular files) in the {kind}.",
        )
    if info.size > caps.line_bytes:
        raise error(
            f"{path}: {name}: is {info.size:,} bytes, over the {_mib(caps.line_bytes)} limit for one request body",
            hint="One file is one request body; is this the right archive?",
        )
    source = archive.extractfile(info)
    return source.read(caps.line_bytes + 1) if source is not None else b""


def _check_members(path: Path, kind: str, error: type[InputError], caps: Caps, count: int, total: int) -> None:
    if count > caps.records:
        raise _too_many(path, kind, error, caps, "")
    if total > caps.bytes:
        raise error(
            f"{path}: its request bodies are over {caps.describe_bytes()} together, the limit for {_a(kind)}",
            hint="Keep a sample of the bodies (a few thousand requests describe the traffic).",
        )


def _too_many(path: Path, kind: str, error: type[InputError], caps: Caps, where: str) -> InputError:
    return error(
        f"{path}: {where}holds more than {caps.records:,} requests, the limit for {_a(kind)}",
        hint=_SAMPLE_HINT,
    )


def _empty(path: Path, kind: str, error: type[InputError]) -> InputError:
    return error(f"{path}: is empty: {_a(kind)} holds at least one request", hint="Is this the right file?")


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


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


def parse_json_line(text: str, path: Path, line: int, error: type[InputError] = InputError) -> Any:
    """One line of a JSON Lines file (read with `read_lines`) parsed, within MAX_DEPTH and MAX_VALUES, a refusal
    naming the file and the line."""
    return _parsed_json(text, path, error, line)


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


def _mode(path: Path, kind: str, error: type[InputError]) -> int:
    """The file's mode (what it is), or the one line saying it is not there or cannot be read."""
    try:
        return path.stat().st_mode
    except FileNotFoundError:
        raise error(
            f"{path}: no such {kind}", hint=f"Check the path; a relative path starts from {Path.cwd()}."
        ) from None
    except OSError as exc:
        raise _unreadable(path, exc, error) from None


def _open(path: Path, kind: str, error: type[InputError]) -> BinaryIO:
    """Open for reading, refusing what is not a regular file before a read could block or never end."""
    mode = _mode(path, kind, error)
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
