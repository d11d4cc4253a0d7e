"""The hostile-input tier: every reader of a file a user hands us, fed its own valid file mutated, truncated and
re-typed by hypothesis, through the real entry point (`recommender.cli.main`, in process).

Table-driven: one `Reader` per file kind (its seed file, the command that reads it, what it would store). Each case
asserts exit 2, exactly one `error:` line naming the file, no traceback and nothing stored or written:
- truncated: the file cut short anywhere (inside a JSON Lines record for a record log): never valid;
- re-typed: a field the reader requires, set to a value of a type it never takes;
- mutated: bytes flipped, inserted or deleted anywhere; such a file may stay valid, so the outcome is exit 0 (the
  file was read as it is) or exit 2 with the same one-line, nothing-stored guarantees; never another exit code;
- hostile text: any text value set to Rich markup (`[/x]`), a terminal escape or a line break: exit 0 or 2 likewise
  (what a command prints from a user's file is text, never markup).
A trace file is text of its own format, not JSON: it has no typed fields to re-type and no text values, and a cut
after a whole line leaves a shorter valid trace, so it is truncated with exit 0 allowed and never re-typed. A mooncake
trace is JSON Lines of numbers: re-typed, never given hostile text (it holds none).
Deterministic (derandomize) and bounded: EXAMPLES examples per reader and strategy.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recommender.cli import main

pytestmark = pytest.mark.hostile
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = 25
SETTINGS = settings(
    max_examples=EXAMPLES, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)


@dataclass(frozen=True)
class Reader:
    """One kind of file a user hands us: how to lay out a valid one, the command reading it, what it would store."""

    name: str
    seed: Callable[[Path], None]  # writes a valid input into the (empty) folder
    target: str  # the file that is damaged, relative to the folder
    command: Callable[[Path], list[str]]  # the command line, given the folder
    fields: tuple[tuple[str, tuple[str, ...]], ...]  # (dotted path in the target, kinds it takes): re-typed fields
    json_lines: bool = False  # the target is a record log: a path starts with its line number ("3.metadata")
    structured: bool = True  # the target is JSON (a document or one per line); False: a text format of its own
    texts: bool = True  # the target holds text values (hostile text replaces them)

    def stored(self, folder: Path) -> list[str]:
        """What the command wrote: anything in the folder beyond the seed, and any experiment in the store."""
        found = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.name not in self.seeded(folder))
        database = folder / "r.db"
        if database.is_file():
            with sqlite3.connect(database) as connection:
                tables = {row[0] for row in connection.execute("select name from sqlite_master")}
                if "experiments" in tables:
                    found += [row[0] for row in connection.execute("select name from experiments")]
        return [name for name in found if name != "r.db"]

    def seeded(self, folder: Path) -> set[str]:
        with tempfile.TemporaryDirectory() as fresh:
            self.seed(Path(fresh))
            return {p.name for p in Path(fresh).rglob("*")}


def _import_aiperf(folder: Path) -> list[str]:
    database = f"sqlite:///{folder / 'r.db'}"
    return ["import", "aiperf", str(folder / "run"), "--db", database, "--run-dir", str(folder / "runs")]


def _experiment(folder: Path) -> None:
    (folder / "model.onnx").write_bytes(b"\x08\x07")
    document = {  # JSON is YAML: a flow-style document cut anywhere is never valid YAML
        "name": "fuzzed",
        "model": {"source": "onnx", "path": "model.onnx"},
        "target": {"kind": "local", "instance_type": "local-cpu"},
        "traffic": {"phases": [{"initial_users": 1, "spawn_rate": 0, "duration_seconds": 10}]},
        "latency_threshold": {"percentile": "p95", "ms": 500},
    }
    (folder / "experiment.yaml").write_text(json.dumps(document))


def _aiperf(folder: Path) -> None:
    shutil.copytree(ROOT / "tests" / "data" / "aiperf" / "timeouts-40", folder / "run")
    (folder / "run" / "profile_export_aiperf.json").write_text(
        json.dumps(json.loads((folder / "run" / "profile_export_aiperf.json").read_text()))
    )


def _aiperf_chat(folder: Path) -> None:
    shutil.copytree(ROOT / "tests" / "data" / "aiperf" / "chat-c2-24", folder / "run")


def _with_payload(folder: Path) -> None:
    _experiment(folder)
    document = json.loads((folder / "experiment.yaml").read_text())
    (folder / "experiment.yaml").write_text(json.dumps(document | {"payload": {"file": "payload.jsonl"}}))
    rows = [{"text": "hello world"}, {"input_ids": [101, 7592, 2088, 102]}, {"text": "The quick brown fox jumps."}]
    (folder / "payload.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


def _with_trace(folder: Path) -> None:
    _experiment(folder)
    document = json.loads((folder / "experiment.yaml").read_text())
    document["traffic"] = {"trace": {"file": "trace.csv"}}
    (folder / "experiment.yaml").write_text(json.dumps(document | {"payload": {"texts": ["a", "b", "c"]}}))
    (folder / "trace.csv").write_text("# seconds, payload index\n0.0,0\n0.25,1\n0.5,2\n1.0,0\n1.5,1\n")


def _with_prompts(folder: Path) -> None:
    _experiment(folder)
    document = json.loads((folder / "experiment.yaml").read_text())
    (folder / "experiment.yaml").write_text(json.dumps(document | {"payload": {"file": "chat.jsonl"}}))
    rows = [
        {"prompt": "Write a haiku about queues.", "output_tokens": 32},
        {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is TTFT?"}]},
        {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 8},
    ]
    (folder / "chat.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


CHAT_TARGET = {"kind": "remote", "protocol": "openai-chat", "url": "http://127.0.0.1:9/v1", "model": "m"}


def _with_mooncake(folder: Path) -> None:
    _experiment(folder)
    document = json.loads((folder / "experiment.yaml").read_text())
    document["traffic"] = {"trace": {"file": "trace.jsonl", "format": "mooncake"}}
    document["target"] = CHAT_TARGET  # its prompts go to generative endpoints only
    (folder / "experiment.yaml").write_text(json.dumps(document))
    rows = [(0, 12, 4, [0]), (250, 30, 8, [0, 1]), (600, 7, 2, []), (1000, 50, 16, [2, 3])]
    (folder / "trace.jsonl").write_text(
        "".join(
            json.dumps({"timestamp": t, "input_length": n, "output_length": m, "hash_ids": h}) + "\n"
            for t, n, m, h in rows
        )
    )


def _with_tokenizer(folder: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers

    _experiment(folder)
    document = json.loads((folder / "experiment.yaml").read_text())
    generation = {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 4}, "count": 3, "tokenizer": "tok"}
    document |= {"payload": {"generation": generation}, "target": CHAT_TARGET}
    (folder / "experiment.yaml").write_text(json.dumps(document))
    words = [a + b for a in "abcdefgh" for b in "abcdefghijklmnop"]  # 128 one-token words: prompts can be made
    vocab = {"[UNK]": 0} | {word: k + 1 for k, word in enumerate(words)}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    (folder / "tok").mkdir()
    (folder / "tok" / "tokenizer.json").write_text(json.dumps(json.loads(tokenizer.to_str())))


def _job(folder: Path) -> None:
    shutil.copy(ROOT / "tests" / "data" / "sagemaker_job.json", folder / "job.json")
    (folder / "job.json").write_text(json.dumps(json.loads((folder / "job.json").read_text())))


def _prices(folder: Path) -> None:
    (folder / ".recommender").mkdir()
    catalog = {
        "region": "us-east-1",
        "source": "fuzz seed",
        "retrieved": "2026-11-22",
        "instances": {"ml.c5.xlarge": {"usd_per_hour": 0.204, "vcpus": 4, "memory_gib": 8}},
    }
    (folder / ".recommender" / "prices.yaml").write_text(json.dumps(catalog))


TEXT, NUMBER, INT, LIST, OBJECT, NONE = "text", "number", "int", "list", "object", "none"
READERS = [
    Reader(
        "experiment file",
        _experiment,
        "experiment.yaml",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (
            ("name", (TEXT,)),
            ("model", (OBJECT,)),
            ("model.source", (TEXT,)),
            ("target", (OBJECT,)),
            ("target.kind", (TEXT,)),
            ("traffic", (OBJECT,)),
            ("traffic.phases", (LIST,)),
            ("traffic.phases.0.initial_users", (INT, NUMBER)),
            ("traffic.phases.0.duration_seconds", (INT, NUMBER)),
            ("latency_threshold.ms", (INT, NUMBER)),
        ),
    ),
    Reader(
        "payload file",
        _with_payload,
        "payload.jsonl",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (("1.text", (TEXT,)), ("2.input_ids", (LIST,)), ("3.text", (TEXT,))),
        json_lines=True,
    ),
    Reader(
        "prompt file",
        _with_prompts,
        "chat.jsonl",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (
            ("1.prompt", (TEXT,)),
            ("1.output_tokens", (INT,)),
            ("2.messages", (LIST,)),
            ("2.messages.1.content", (TEXT,)),
            ("2.messages.0.role", (TEXT,)),
            ("3.max_tokens", (INT,)),
        ),
        json_lines=True,
    ),
    Reader(
        "mooncake trace",
        _with_mooncake,
        "trace.jsonl",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (("1.timestamp", (INT, NUMBER)), ("2.input_length", (INT,)), ("3.output_length", (INT,))),
        json_lines=True,
        texts=False,
    ),
    Reader(
        "tokenizer file",
        _with_tokenizer,
        "tok/tokenizer.json",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (("model", (OBJECT,)), ("model.type", (TEXT,)), ("model.vocab", (OBJECT,)), ("model.unk_token", (TEXT,))),
    ),
    Reader(
        "trace file",
        _with_trace,
        "trace.csv",
        lambda folder: ["validate", str(folder / "experiment.yaml")],
        (),
        structured=False,
    ),
    Reader(
        "AIPerf aggregate file",
        _aiperf,
        "run/profile_export_aiperf.json",
        _import_aiperf,
        (
            ("schema_version", (TEXT,)),
            ("input_config", (OBJECT,)),
            ("input_config.models", (OBJECT,)),
            ("input_config.models.items", (LIST,)),
            ("input_config.endpoint", (OBJECT,)),
            ("input_config.endpoint.type", (TEXT,)),
            ("input_config.endpoint.urls", (LIST, TEXT)),
            ("input_config.phases", (LIST,)),
            ("input_config.phases.0.concurrency", (INT,)),
        ),
    ),
    Reader(
        "AIPerf record file",
        _aiperf,
        "run/profile_export.jsonl",
        _import_aiperf,
        (
            ("3.metadata", (OBJECT,)),
            ("3.metadata.request_start_ns", (INT,)),
            ("3.metadata.request_end_ns", (INT,)),
            ("1.metrics", (OBJECT,)),
            ("1.metrics.request_latency", (OBJECT, NONE)),
            ("1.metrics.request_latency.value", (INT, NUMBER)),
            ("1.metrics.request_latency.unit", (TEXT,)),
        ),
        json_lines=True,
    ),
    Reader(
        "AIPerf chat record file",
        _aiperf_chat,
        "run/profile_export.jsonl",
        _import_aiperf,
        (
            ("3.metrics.time_to_first_token", (OBJECT, NONE)),
            ("3.metrics.time_to_first_token.value", (INT, NUMBER)),
            ("3.metrics.time_to_first_token.unit", (TEXT,)),
            ("3.metrics.inter_chunk_latency", (OBJECT, NONE)),
            ("3.metrics.inter_chunk_latency.value", (LIST,)),
            ("3.metrics.output_sequence_length", (OBJECT, NONE)),
            ("3.metrics.output_sequence_length.value", (INT, NUMBER)),
            ("3.metrics.input_sequence_length.value", (INT, NUMBER)),
        ),
        json_lines=True,
    ),
    Reader(
        "SageMaker job request",
        _job,
        "job.json",
        lambda folder: ["import", "sagemaker-job", str(folder / "job.json"), "--out", str(folder / "out.yaml")],
        (
            ("JobName", (TEXT,)),
            ("JobType", (TEXT,)),
            ("InputConfig", (OBJECT,)),
            ("InputConfig.TrafficPattern.Phases", (LIST,)),
            ("InputConfig.TrafficPattern.Phases.0.InitialNumberOfUsers", (INT,)),
            ("InputConfig.EndpointConfigurations", (LIST,)),
            ("StoppingConditions.MaxInvocations", (INT,)),
        ),
    ),
    Reader(
        "price catalog",
        _prices,
        ".recommender/prices.yaml",
        lambda folder: ["prices", "show"],
        (
            ("region", (TEXT,)),
            ("source", (TEXT,)),
            ("instances", (OBJECT,)),
            ("instances.ml\\.c5\\.xlarge", (OBJECT,)),
            ("instances.ml\\.c5\\.xlarge.usd_per_hour", (INT, NUMBER)),
        ),
    ),
]

STRUCTURED = [reader for reader in READERS if reader.structured]  # what has typed fields
TEXTUAL = [reader for reader in STRUCTURED if reader.texts]  # what has text values
VALUES = {  # a value of each kind, from plain to hostile
    TEXT: st.sampled_from(["", "x", "two", "[/x]", "\u2028", "a" * 300]),  # [/x]: Rich markup, were it read so
    NUMBER: st.sampled_from([0.5, -1.5, 1.5e300]),  # written with a dot: YAML 1.1 reads 1e+300 as text
    INT: st.sampled_from([0, -1, 10**30]),
    LIST: st.lists(st.integers(), max_size=3),
    OBJECT: st.dictionaries(st.sampled_from(["x", "name", "value"]), st.integers(), max_size=2),
    NONE: st.none(),
}


def run(reader: Reader, folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str], str]:
    """Exit code, the `error:` lines and stderr of the reader's command, run in `folder`."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COLUMNS", "2000")  # rich wraps at the terminal width: one message, one line
        patch.delenv("RECOMMENDER_DB_URL", raising=False)
        patch.chdir(folder)
        capsys.readouterr()
        with pytest.raises(SystemExit) as done:
            main(reader.command(folder))
    err = capsys.readouterr().err
    return int(done.value.code or 0), [line for line in err.splitlines() if line.startswith("error:")], err


def refused(reader: Reader, folder: Path, capsys: pytest.CaptureFixture[str], exit_0_allowed: bool = False) -> None:
    code, errors, err = run(reader, folder, capsys)
    if exit_0_allowed and code == 0:
        return
    assert code == 2, f"{reader.name}: exit {code}\n{err}"
    assert len(errors) == 1, err
    assert "Traceback" not in err
    assert reader.stored(folder) == [], err


def seeded(reader: Reader) -> tuple[tempfile.TemporaryDirectory, Path]:
    holder = tempfile.TemporaryDirectory()
    folder = Path(holder.name)
    reader.seed(folder)
    return holder, folder


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_the_seed_itself_is_read(reader: Reader, capsys: pytest.CaptureFixture[str]) -> None:
    """Each seed is valid: what the strategies break was whole."""
    holder, folder = seeded(reader)
    with holder:
        code, _, err = run(reader, folder, capsys)
        assert code == 0, err


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_truncated(reader: Reader, capsys: pytest.CaptureFixture[str]) -> None:
    @SETTINGS
    @given(st.floats(min_value=0, max_value=1, exclude_max=True))
    def case(share: float) -> None:
        holder, folder = seeded(reader)
        with holder:
            path = folder / reader.target
            data = path.read_bytes().rstrip()
            cuts = [n for n in range(len(data)) if not reader.json_lines or n == 0 or data[n - 1 : n] != b"\n"]
            path.write_bytes(data[: cuts[int(share * len(cuts))]])
            refused(reader, folder, capsys, exit_0_allowed=not reader.structured)

    case()


@pytest.mark.parametrize("reader", STRUCTURED, ids=[r.name for r in STRUCTURED])
def test_retyped(reader: Reader, capsys: pytest.CaptureFixture[str]) -> None:
    @SETTINGS
    @given(st.data())
    def case(data: st.DataObject) -> None:
        field, kinds = data.draw(st.sampled_from(reader.fields))
        other = data.draw(st.sampled_from([kind for kind in VALUES if kind not in kinds and not _close(kind, kinds)]))
        value = data.draw(VALUES[other])
        holder, folder = seeded(reader)
        with holder:
            _set(folder / reader.target, field, value, reader.json_lines)
            refused(reader, folder, capsys)

    case()


@pytest.mark.parametrize("reader", READERS, ids=[r.name for r in READERS])
def test_mutated(reader: Reader, capsys: pytest.CaptureFixture[str]) -> None:
    edits = st.lists(
        st.tuples(
            st.sampled_from(["flip", "insert", "delete"]),
            st.floats(0, 1, exclude_max=True),
            st.binary(min_size=1, max_size=4),
        ),
        min_size=1,
        max_size=4,
    )

    @SETTINGS
    @given(edits)
    def case(changes: list[tuple[str, float, bytes]]) -> None:
        holder, folder = seeded(reader)
        with holder:
            path = folder / reader.target
            data = bytearray(path.read_bytes())
            for how, where, payload in changes:
                at = int(where * len(data))
                if how == "flip" and data:
                    data[at] ^= payload[0] or 0xFF
                elif how == "insert":
                    data[at:at] = payload
                elif data:
                    del data[at : at + len(payload)]
            path.write_bytes(bytes(data))
            refused(reader, folder, capsys, exit_0_allowed=True)

    case()


HOSTILE_TEXT = st.sampled_from(["[/x]", "[bold]x", "\x1b[31mred", "\u2028", "line\nbreak", "a" * 300, ""])


@pytest.mark.parametrize("reader", TEXTUAL, ids=[r.name for r in TEXTUAL])
def test_hostile_text(reader: Reader, capsys: pytest.CaptureFixture[str]) -> None:
    """Any text in the file (a name, a source, a note's subject) set to markup, escapes or breaks: read as it is
    (exit 0, whatever is printed) or refused in one line (exit 2); never a traceback."""

    @SETTINGS
    @given(st.data())
    def case(data: st.DataObject) -> None:
        holder, folder = seeded(reader)
        with holder:
            path = folder / reader.target
            document = json.loads(path.read_text().split("\n")[2] if reader.json_lines else path.read_text())
            field = data.draw(st.sampled_from(_text_leaves(document)))
            _set(path, f"3.{field}" if reader.json_lines else field, data.draw(HOSTILE_TEXT), reader.json_lines)
            refused(reader, folder, capsys, exit_0_allowed=True)

    case()


def _text_leaves(document: Any, prefix: str = "") -> list[str]:
    """The dotted paths (a dot inside a name written `\\.`) of every text value in a JSON document."""
    if isinstance(document, str):
        return [prefix]
    if not isinstance(document, dict | list):
        return []
    items = document.items() if isinstance(document, dict) else enumerate(document)
    return [
        leaf
        for key, value in items
        for leaf in _text_leaves(value, f"{prefix}.{str(key).replace('.', chr(92) + '.')}".lstrip("."))
    ]


def _close(kind: str, kinds: tuple[str, ...]) -> bool:
    """Kinds a reader may fairly take for one another: an int where a number goes (and a number such as 2.0 where
    an int goes is a kind the drawn values avoid: NUMBER's are never whole)."""
    return kind == INT and NUMBER in kinds


def _set(path: Path, field: str, value: Any, json_lines: bool) -> None:
    """Set `field` (dotted; `\\.` is a dot inside a name) of the JSON document at `path` (of line N of a record log,
    the path's first part) to `value`."""
    names = [part.replace("\0", ".") for part in field.replace("\\.", "\0").split(".")]
    if json_lines:
        lines = path.read_text().split("\n")
        number, names = int(names[0]), names[1:]
        record = json.loads(lines[number - 1])
        _assign(record, names, value)
        lines[number - 1] = json.dumps(record)
        path.write_text("\n".join(lines))
        return
    document = json.loads(path.read_text())
    _assign(document, names, value)
    path.write_text(json.dumps(document))


def _assign(document: Any, names: list[str], value: Any) -> None:
    for name in names[:-1]:
        document = document[int(name)] if isinstance(document, list) else document[name]
    last = names[-1]
    if isinstance(document, list):
        document[int(last)] = value
    else:
        document[last] = value
