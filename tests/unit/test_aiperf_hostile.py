"""`recommender import aiperf` on hostile folders: every case is one line naming the file and the field, exit 2, no
traceback, nothing stored (issue 38's table and the defects beside it); an unwritable --run-dir stores nothing."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from recommender.cli import main
from recommender.store.results import ResultStore

DATA = Path(__file__).parents[1] / "data" / "aiperf"
AGGREGATE, RECORDS = "profile_export_aiperf.json", "profile_export.jsonl"


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "1000")  # rich wraps at the terminal width: keep each message on one line
    monkeypatch.chdir(tmp_path)


def copied(tmp_path: Path) -> Path:
    folder = tmp_path / "run"
    shutil.copytree(DATA / "c2-80", folder)
    return folder


def config(change: Callable[[dict[str, Any]], None]) -> Callable[[Path], None]:
    """Change the aggregate JSON's input_config."""

    def apply(folder: Path) -> None:
        aggregate = json.loads((folder / AGGREGATE).read_text())
        change(aggregate["input_config"])
        (folder / AGGREGATE).write_text(json.dumps(aggregate))

    return apply


def record(change: Callable[[dict[str, Any]], None], line: int = 3) -> Callable[[Path], None]:
    """Change one record (line `line` of the JSONL), written back with json.dumps (Infinity as Python writes it)."""

    def apply(folder: Path) -> None:
        lines = (folder / RECORDS).read_text().splitlines()
        parsed = json.loads(lines[line - 1])
        change(parsed)
        lines[line - 1] = json.dumps(parsed)
        (folder / RECORDS).write_text("\n".join(lines) + "\n")

    return apply


def raw_line(data: bytes, line: int = 3) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        lines = (folder / RECORDS).read_bytes().split(b"\n")
        lines[line - 1] = data
        (folder / RECORDS).write_bytes(b"\n".join(lines))

    return apply


def setter(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """Set a dotted path (`metadata.request_start_ns`) of a dict to `value`."""

    def change(document: dict[str, Any]) -> None:
        *parents, name = path.split(".")
        for parent in parents:
            document = document[parent]
        document[name] = value

    return change


def first_phase(name: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda c: c["phases"][0].__setitem__(name, value)


LATENCY, START = "line 3: field metrics.request_latency is", "line 3: field metadata.request_start_ns is"
CASES = [  # (case, damage, what the one line says)
    ("latency-infinity", record(setter("metrics.request_latency.value", float("inf"))), LATENCY),
    ("latency-1e300", record(setter("metrics.request_latency.value", 1e300)), LATENCY),
    ("latency-nan", record(setter("metrics.request_latency.value", float("nan"))), LATENCY),
    ("latency-text", record(setter("metrics.request_latency.value", "fast")), LATENCY),
    ("latency-unit", record(setter("metrics.request_latency.unit", "fortnights")), LATENCY),
    ("start-1e30-float", record(setter("metadata.request_start_ns", 1e30)), f"{START} 1e+30"),
    ("start-1e30-int", record(setter("metadata.request_start_ns", 10**30)), f"{START} 10000"),
    ("start-text", record(setter("metadata.request_start_ns", "two")), f"{START} 'two'"),
    ("start-true", record(setter("metadata.request_start_ns", True)), f"{START} True"),
    ("start-missing", record(lambda r: r["metadata"].pop("request_start_ns")), "request_start_ns missing"),
    ("end-before-start", record(setter("metadata.request_end_ns", 1)), "field metadata.request_end_ns is before"),
    ("metadata-list", record(setter("metadata", [1, 2])), "line 3: field metadata is [1, 2], not an object"),
    ("metrics-text", record(setter("metrics", "fast")), "line 3: field metrics is 'fast', not an object"),
    ("record-list", raw_line(b"[1, 2, 3]"), "line 3: field (the record) is [1, 2, 3], not an object"),
    ("not-utf8", raw_line(b'{"metadata": "caf\xe9"}'), "is not UTF-8 text (byte 0xe9"),
    ("nul", raw_line(b'{"metadata": "\x00"}'), "is binary (it holds NUL bytes)"),
    ("deep-line", raw_line(b"[" * 5000 + b"]" * 5000), "line 3: is nested more than 64 levels deep"),
    ("cut-line", raw_line(b'{"metadata": {"request_st'), "line 3, column 15: not valid JSON"),
    ("phases-dict", config(setter("phases", {"kind": "profiling"})), "field input_config.phases is {'kind'"),
    ("phases-strings", config(setter("phases", ["profiling"])), "field input_config.phases is ['profiling']"),
    ("endpoint-string", config(setter("endpoint", "http://x")), "input_config.endpoint is 'http://x', not an object"),
    ("models-list", config(setter("models", ["minilm"])), "input_config.models is ['minilm'], not an object"),
    ("model-nameless", config(setter("models", {"items": [{}]})), "field input_config.models.items is [{}]"),
    ("concurrency-two", config(first_phase("concurrency", "two")), "concurrency is 'two', not a whole number"),
    ("concurrency-huge", config(first_phase("concurrency", 10**30)), "concurrency is 10000"),
    ("concurrency-float", config(first_phase("concurrency", 2.5)), "concurrency is 2.5, not a whole number"),
    ("concurrency-markup", config(first_phase("concurrency", "[/x]")), "concurrency is '[/x]', not a whole number"),
    ("rate-run", config(first_phase("type", "poisson")), "found 'poisson'); an open-loop (rate) run is not imported"),
    (
        "rankings-endpoint",
        config(setter("endpoint.type", "rankings")),
        "type is 'rankings': recommender stores embeddings, chat, completions runs only",
    ),
    (
        "chat-not-streamed",
        config(setter("endpoint.type", "chat")),
        "field input_config.endpoint.streaming is None: a chat run that was not streamed has no token times",
    ),
    ("no-endpoint-type", config(setter("endpoint.type", None)), "field input_config.endpoint.type is None"),
    ("urls-number", config(setter("endpoint.urls", 5)), "field input_config.endpoint.urls is 5, not a list of URLs"),
    ("urls-empty", config(setter("endpoint.urls", [])), "field input_config.endpoint.urls is [], not a list of URLs"),
    ("input-config-list", lambda f: _replace_config(f, []), "field input_config is [], not an object"),
    ("aggregate-list", lambda f: (f / AGGREGATE).write_text("[]"), "schema_version None"),
    ("aggregate-binary", lambda f: (f / AGGREGATE).write_bytes(b"\x7fELF\x00"), "is binary (it holds NUL bytes)"),
    ("records-gone", lambda f: (f / RECORDS).unlink(), "profile_export.jsonl: no such file"),
    ("records-folder", lambda f: (f / RECORDS).unlink() or (f / RECORDS).mkdir(), "is a directory"),
]


def _replace_config(folder: Path, value: Any) -> None:
    aggregate = json.loads((folder / AGGREGATE).read_text())
    (folder / AGGREGATE).write_text(json.dumps(aggregate | {"input_config": value}))


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main([str(arg) for arg in args])
    return int(done.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize(("case", "damage", "reason"), CASES, ids=[c[0] for c in CASES])
def test_a_hostile_folder_is_one_line_exit_2_nothing_stored(capsys, tmp_path, case, damage, reason) -> None:
    folder, db, runs = copied(tmp_path), f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "runs"
    damage(folder)
    code, err = run_cli(capsys, "import", "aiperf", folder, "--db", db, "--run-dir", runs)
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2, err
    assert len(errors) == 1 and reason in errors[0], err
    assert "Traceback" not in err
    assert ResultStore.open(db).experiments() == [] and not runs.exists()


def test_urls_as_one_string_is_that_url(capsys, tmp_path) -> None:
    folder, db = copied(tmp_path), f"sqlite:///{tmp_path / 'r.db'}"
    config(setter("endpoint.urls", "http://127.0.0.1:18431"))(folder)
    code, err = run_cli(capsys, "import", "aiperf", folder, "--db", db, "--run-dir", tmp_path / "runs")
    assert code == 0, err
    stored = ResultStore.open(db).experiment("aiperf-run").spec
    assert stored["target"]["endpoint"] == "http://127.0.0.1:18431"  # not 'h', the string's first character


def test_an_unwritable_run_dir_stores_nothing(capsys, tmp_path) -> None:
    folder, db = copied(tmp_path), f"sqlite:///{tmp_path / 'r.db'}"
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")  # a folder under a file cannot be made, whoever runs the test (root too)
    code, err = run_cli(capsys, "import", "aiperf", folder, "--db", db, "--run-dir", blocker / "runs")
    assert code == 2 and "Traceback" not in err
    assert f"--run-dir {blocker / 'runs'}: cannot write" in err and "nothing stored" in err
    assert ResultStore.open(db).experiments() == []
    code, err = run_cli(capsys, "import", "aiperf", folder, "--db", db, "--run-dir", tmp_path / "runs")
    assert code == 0, err  # the same import with a writable folder: stored, and not "stored already"
    assert len(list(ResultStore.open(db).runs("aiperf-run"))) == 1


def test_a_failed_store_write_leaves_no_records_behind(capsys, tmp_path, monkeypatch) -> None:
    from recommender.errors import StoreError

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise StoreError("results database write failed: disk I/O error")

    monkeypatch.setattr(ResultStore, "save_imported_run", refuse)
    folder, db, runs = copied(tmp_path), f"sqlite:///{tmp_path / 'r.db'}", tmp_path / "runs"
    code, err = run_cli(capsys, "import", "aiperf", folder, "--db", db, "--run-dir", runs)
    assert code == 1 and "disk I/O error" in err
    assert list(runs.rglob("*.npz")) == []
