"""The user's payload file (`payload.file`): every format read into the request rows the job sends (through the seam
`load/payload.request_token_ids`), sampled with a seed, fingerprinted into the reuse key; every bad file refused by
`recommender validate` with exit 2 and one problem line naming the file, the line and the fix."""

from __future__ import annotations

import base64
import io
import json
import os
import tarfile
from pathlib import Path

import pytest

from recommender.cli import main, report_error
from recommender.errors import InputError
from recommender.files.document import Caps
from recommender.job.protocol import payload_document, protocol_document, stored_payload
from recommender.load.payload import request_texts, request_token_ids, token_ids
from recommender.load.payload_source import payload_fingerprint, payload_requests
from recommender.spec import PayloadSpec, load_spec

TEXTS = ["the first query", "a second, longer query about serving models", "third"]
VERSIONS = {"locust": "x"}


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at the terminal width: keep each message on one line
    monkeypatch.delenv("RECOMMENDER_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def experiment(tmp_path: Path, payload: str, target: str = "") -> Path:
    path = tmp_path / "experiment.yaml"
    path.write_text(f"name: mine\npayload:\n{payload}{target}")
    return path


def validate(capsys: pytest.CaptureFixture, path: Path) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    return done.value.code, capsys.readouterr().err


def rows_of(tmp_path: Path, payload: str) -> list[list[int]]:
    return request_token_ids(load_spec(experiment(tmp_path, payload)).payload)


def texts_rows(texts: list[str]) -> list[list[int]]:
    return [token_ids(text, 128) for text in texts]


def capture_record(body: str, encoding: str = "JSON", content_type: str = "application/json") -> str:
    data = base64.b64encode(body.encode()).decode() if encoding == "BASE64" else body
    endpoint_input = {"observedContentType": content_type, "mode": "INPUT", "data": data, "encoding": encoding}
    return json.dumps({"captureData": {"endpointInput": endpoint_input}, "eventMetadata": {"eventId": "e"}})


# --- every format, read into the rows the job sends ---------------------------------------------------------------


def test_without_a_file_the_rows_are_the_packaged_texts_as_before():
    payload = PayloadSpec()
    assert request_token_ids(payload) == texts_rows(list(payload.texts))


def test_jsonl_of_texts_and_of_token_ids(tmp_path):
    lines = [json.dumps({"text": TEXTS[0]}), json.dumps({"input_ids": [101, 7592, 2088, 102]}), ""]
    (tmp_path / "q.jsonl").write_text("\n".join(lines))
    assert rows_of(tmp_path, "  file: q.jsonl\n") == [*texts_rows(TEXTS[:1]), [101, 7592, 2088, 102]]


def test_plain_text_one_request_a_line_blank_lines_skipped(tmp_path):
    (tmp_path / "q.txt").write_text("\r\n".join([TEXTS[0], "", TEXTS[1], TEXTS[2]]) + "\r\n")
    assert rows_of(tmp_path, "  file: q.txt\n") == texts_rows(TEXTS)


def test_csv_reads_the_named_column(tmp_path):
    (tmp_path / "q.csv").write_text('id,query\n1,the first query\n2,"a second, longer query about serving models"\n')
    assert rows_of(tmp_path, "  file: q.csv\n  column: query\n") == texts_rows(TEXTS[:2])


def test_a_quoted_csv_text_may_span_lines_and_the_next_row_keeps_its_line_number(tmp_path, capsys):
    (tmp_path / "q.csv").write_text('id,text\n1,"two\nlines, quoted"\n2,plain\n3\n')
    code, err = validate(capsys, experiment(tmp_path, "  file: q.csv\n"))
    assert code == 2 and "q.csv: line 5: has 1 columns" in err
    (tmp_path / "q.csv").write_text('id,text\n1,"two\nlines, quoted"\n2,plain\n')
    assert [r.text for r in payload_requests(load_spec(experiment(tmp_path, "  file: q.csv\n")).payload)] == [
        "two\nlines, quoted",
        "plain",
    ]


def test_sagemaker_data_capture_json_base64_and_csv_inputs(tmp_path):
    records = [
        capture_record(json.dumps({"inputs": TEXTS[0]})),
        capture_record(json.dumps({"inputs": [TEXTS[1]]}), encoding="BASE64"),
        capture_record(TEXTS[2], encoding="CSV", content_type="text/csv"),
    ]
    (tmp_path / "capture.jsonl").write_text("\n".join(records) + "\n")
    assert rows_of(tmp_path, "  file: capture.jsonl\n  format: sagemaker-capture\n") == texts_rows(TEXTS)
    assert rows_of(tmp_path, "  file: capture.jsonl\n") == texts_rows(TEXTS)  # auto: a capture line reads as one


def kserve_body(ids: list[int], pad: int) -> str:
    shape = [1, len(ids) + pad]
    return json.dumps(
        {
            "inputs": [
                {"name": "input_ids", "shape": shape, "datatype": "INT64", "data": ids + [0] * pad},
                {"name": "attention_mask", "shape": shape, "datatype": "INT64", "data": [1] * len(ids) + [0] * pad},
            ]
        }
    )


SAMPLE_BODIES = {
    "a.json": json.dumps({"inputs": TEXTS[0]}),
    "b.txt": TEXTS[1],
    "c.json": kserve_body([101, 7592, 102], pad=5),  # the padding left out by its attention mask
}
SAMPLE_ROWS = [*texts_rows(TEXTS[:2]), [101, 7592, 102]]


def test_a_folder_of_request_bodies(tmp_path):
    folder = tmp_path / "payloads"
    folder.mkdir()
    for name, body in SAMPLE_BODIES.items():
        (folder / name).write_text(body)
    assert rows_of(tmp_path, "  file: payloads\n") == SAMPLE_ROWS


def test_a_tar_gz_of_request_bodies_as_sample_payload_url_holds_them(tmp_path):
    with tarfile.open(tmp_path / "payload.tar.gz", "w:gz") as archive:
        for name, body in SAMPLE_BODIES.items():
            info = tarfile.TarInfo(f"./{name}")
            info.size = len(body.encode())
            archive.addfile(info, io.BytesIO(body.encode()))
    assert rows_of(tmp_path, "  file: payload.tar.gz\n") == SAMPLE_ROWS


# --- sampling and the fingerprint ----------------------------------------------------------------------------------


def numbered(tmp_path: Path, count: int, name: str = "q.txt") -> Path:
    path = tmp_path / name
    path.write_text("".join(f"query number {i}\n" for i in range(count)))
    return path


def test_a_sample_is_seeded_kept_in_file_order_and_another_seed_picks_others(tmp_path):
    path = numbered(tmp_path, 50)
    picked = [r.text for r in payload_requests(PayloadSpec(file=path, sample=10, seed=1))]
    assert picked == [r.text for r in payload_requests(PayloadSpec(file=path, sample=10, seed=1))]
    assert len(picked) == 10 and picked == sorted(picked, key=lambda text: int(text.split()[-1]))
    assert picked != [r.text for r in payload_requests(PayloadSpec(file=path, sample=10, seed=2))]


def test_the_reuse_key_follows_the_requests_not_the_path(tmp_path):
    path = numbered(tmp_path, 20)
    key = protocol_document(load_spec(experiment(tmp_path, f"  file: {path}\n")), VERSIONS)["payload"]
    moved = path.rename(tmp_path / "moved.txt")
    assert protocol_document(load_spec(experiment(tmp_path, f"  file: {moved}\n")), VERSIONS)["payload"] == key
    sampled = load_spec(experiment(tmp_path, f"  file: {moved}\n  sample: 5\n"))
    assert protocol_document(sampled, VERSIONS)["payload"] != key
    moved.write_text(moved.read_text() + "one request more\n")
    os.utime(moved, ns=(1, 1))  # a changed file is read again, whatever its clock says
    assert protocol_document(load_spec(experiment(tmp_path, f"  file: {moved}\n")), VERSIONS)["payload"] != key


def test_a_file_gone_since_validate_is_one_line_at_run_time_not_a_traceback(tmp_path):
    path = numbered(tmp_path, 3)
    payload = load_spec(experiment(tmp_path, "  file: q.txt\n")).payload
    assert len(request_token_ids(payload)) == 3
    path.unlink()
    with pytest.raises(InputError, match=r"q\.txt: no such payload file"):
        request_token_ids(payload)


def test_the_packaged_texts_keep_the_key_they_always_had():
    payload = PayloadSpec()
    assert payload_document(payload) == {"texts": list(payload.texts), "sequence_length": payload.sequence_length}


def test_what_a_run_stores_of_its_payload(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"input_ids": [101] + [7592] * n + [102]}) + "\n" for n in (1, 1, 4, 10)))
    stored = stored_payload(PayloadSpec(file=path))
    assert (stored.requests, stored.min_tokens, stored.max_tokens, stored.mean_tokens) == (4, 3, 12, 6.0)
    assert stored.median_tokens == 4.5 and stored.source == "q.jsonl"
    assert sum(b.requests for b in stored.histogram) == 4
    assert stored.fingerprint == payload_fingerprint(PayloadSpec(file=path))


def test_a_stack_that_tokenizes_is_sent_the_files_requests_as_text_token_ids_included(tmp_path):
    """What an OpenAI-compatible stack (Infinity) is sent: the same rows, decoded; they tokenize to the same ids."""
    path = tmp_path / "q.jsonl"
    rows = [
        json.dumps({"text": TEXTS[0]}),
        json.dumps({"text": TEXTS[1]}),
        json.dumps({"input_ids": [101, 7592, 2088, 102]}),
    ]
    path.write_text("\n".join(rows) + "\n")
    texts = request_texts(PayloadSpec(file=path))
    assert texts == [*TEXTS[:2], "hello world"]
    assert [token_ids(text, 128) for text in texts] == request_token_ids(PayloadSpec(file=path))


# --- refusals: one problem line naming the file and the line, exit 2 ------------------------------------------------


def _huge(path: Path) -> None:
    with open(path, "wb") as handle:  # sparse: nothing written
        handle.truncate(Caps().bytes + 1)


def _symlinked_tar(path: Path) -> None:
    with tarfile.open(path, "w:gz") as archive:
        info = tarfile.TarInfo("evil")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
        archive.addfile(info)


REFUSED = [
    ("empty", "q.txt", lambda p: p.write_text("\n  \n"), "", "q.txt: is empty"),
    ("not utf-8", "q.txt", lambda p: p.write_bytes(b"ok\nfine\ncaf\xe9\n"), "", "q.txt: line 3: is not UTF-8 text"),
    ("binary", "q.txt", lambda p: p.write_bytes(b"ok\n\x00\x01"), "", "q.txt: line 2: is binary"),
    ("huge", "q.txt", _huge, "", "is 67,108,865 bytes, over the 64 MiB limit for a payload file"),
    (
        "line too long",
        "q.txt",
        lambda p: p.write_text("short\n" + "x" * (Caps().line_bytes + 1) + "\n"),
        "",
        "q.txt: line 2: is 1,048,577 bytes, over the 1 MiB limit for one line",
    ),
    (
        "too many",
        "q.txt",
        lambda p: p.write_text("a\n" * (Caps().records + 1)),
        "",
        "q.txt: line 100001: holds more than 100,000 requests",
    ),
    ("bad json", "q.jsonl", lambda p: p.write_text('{"text": "a"}\n{"text": \n'), "", "line 2: not valid JSON"),
    ("no text", "q.jsonl", lambda p: p.write_text('{"query": "a"}\n'), "", "line 1: is an object with the keys query"),
    ("empty text", "q.jsonl", lambda p: p.write_text('{"text": ""}\n'), "", "line 1: `text` is empty, not a text"),
    ("bad ids", "q.jsonl", lambda p: p.write_text('{"input_ids": [101, -1]}\n'), "", "line 1: `input_ids` is not"),
    (
        "ids too long",
        "q.jsonl",
        lambda p: p.write_text(json.dumps({"input_ids": [101] * 200}) + "\n"),
        "  sequence_length: 128\n",
        "line 1: holds 200 token ids, more than the 128 a request carries (payload.sequence_length)",
    ),
    (
        "id outside vocab",
        "q.jsonl",
        lambda p: p.write_text('{"input_ids": [101, 30522, 102]}\n'),
        "",
        "line 1: holds the token id 30522, outside the model's vocabulary (0 to 30521)",
    ),
    ("no column", "q.csv", lambda p: p.write_text("id,query\n1,a\n"), "", "line 1: the header has no column `text`"),
    ("open quote", "q.csv", lambda p: p.write_text('id,text\n1,"never closed\n'), "", "line 2: not valid CSV"),
    ("short row", "q.csv", lambda p: p.write_text("id,text\n1,a\n2\n"), "", "q.csv: line 3: has 1 columns"),
    ("sample", "q.txt", lambda p: p.write_text("a\nb\n"), "  sample: 3\n", "holds 2 requests, fewer than"),
    ("suffix", "q.dat", lambda p: p.write_text("a\n"), "", "q.dat: cannot tell a payload file's format"),
    ("missing", "nothere.txt", lambda p: None, "", "nothere.txt: no such payload file"),
    ("link in tar", "p.tar.gz", _symlinked_tar, "", "p.tar.gz: evil: is a link or a special file"),
    ("not a tar", "p.tgz", lambda p: p.write_bytes(b"not gzip"), "", "p.tgz: is neither a folder nor a readable"),
    (
        "capture",
        "c.jsonl",
        lambda p: p.write_text('{"text": "a"}\n'),
        "  format: sagemaker-capture\n",
        "c.jsonl: line 1: is not a SageMaker data-capture record",
    ),
    (
        "batch body",
        "c.jsonl",
        lambda p: p.write_text(json.dumps({"inputs": ["a", "b"]}) + "\n"),
        "",
        "line 1: `inputs` holds 2 texts; a request here is one text",
    ),
    (
        "bad mask",
        "q.jsonl",
        lambda p: p.write_text(
            json.dumps({"inputs": [{"name": "input_ids", "data": [1]}, {"name": "attention_mask", "data": 7}]})
        ),
        "",
        "line 1: the KServe v2 body's attention_mask is not a list of 0 and 1",
    ),
    (
        "odd tensor name",
        "q.jsonl",
        lambda p: p.write_text(json.dumps({"inputs": [{"name": ["x"]}]})),
        "",
        "line 1: is a KServe v2 body without an input_ids tensor",
    ),
    ("markup", "q.csv", lambda p: p.write_text("[/x]\n1\n"), "", "has no column `text` (it has [/x])"),
]


@pytest.mark.parametrize(("name", "make", "extra", "says"), [case[1:] for case in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_bad_payload_file_exits_2_with_one_line_naming_the_file_and_line(tmp_path, capsys, name, make, extra, says):
    make(tmp_path / name)
    code, err = validate(capsys, experiment(tmp_path, f"  file: {name}\n{extra}"))
    assert code == 2, err
    assert "Traceback" not in err
    problems = [line for line in err.splitlines() if "payload.file:" in line]
    assert len(problems) == 1 and says in problems[0], err
    assert str(tmp_path / name) in problems[0]
    assert "hint:" in err


def test_token_ids_for_a_stack_that_tokenizes_validate(tmp_path, capsys):
    (tmp_path / "q.jsonl").write_text('{"text": "fine"}\n{"input_ids": [101, 102]}\n')
    with pytest.raises(SystemExit) as done:
        main(["validate", str(experiment(tmp_path, "  file: q.jsonl\n", "target:\n  kind: infinity\n"))])
    assert done.value.code in (0, None), capsys.readouterr().err


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ("  texts: [a]\n  file: q.txt\n", "give either `texts` or `file`"),
        ("  sample: 3\n", "sample only apply to a payload `file`"),
        ("  column: query\n", "column only apply to a payload `file`"),
    ],
)
def test_file_fields_without_a_file_or_beside_texts_are_refused(tmp_path, capsys, payload, says):
    (tmp_path / "q.txt").write_text("a\n")
    code, err = validate(capsys, experiment(tmp_path, payload))
    assert code == 2 and says in err


def test_a_valid_file_validates(tmp_path, capsys):
    numbered(tmp_path, 5)
    with pytest.raises(SystemExit) as done:
        main(["validate", str(experiment(tmp_path, "  file: q.txt\n  sample: 2\n"))])
    assert done.value.code in (0, None)


def test_a_message_quoting_the_users_file_is_printed_as_text_not_as_markup():
    from rich.console import Console

    out = io.StringIO()
    code = report_error(InputError("q.csv: line 1: no column `text` (it has [/x])", hint="see [/y]"), Console(file=out))
    assert code == 2 and "(it has [/x])" in out.getvalue() and "see [/y]" in out.getvalue()


def test_a_folder_is_walked_in_name_order_and_refused_at_the_cap_as_it_goes(tmp_path):
    from recommender.files.document import read_members

    folder = tmp_path / "bodies"
    (folder / "b").mkdir(parents=True)
    (folder / ".git").mkdir()
    for name in ("z.txt", "a.txt", "b/c.txt", ".git/ignored", ".hidden"):
        (folder / name).write_text(name)
    assert [name for name, _ in read_members(folder, "payload file")] == ["a.txt", "b/c.txt", "z.txt"]
    with pytest.raises(InputError, match="holds more than 2 requests"):
        read_members(folder, "payload file", caps=Caps(records=2))
    deep = tmp_path / "deep"
    for name in ("one", "two", "three"):
        (deep / name).mkdir(parents=True)
    (deep / "body.txt").write_text("a request")
    with pytest.raises(InputError, match="holds more than 2 requests"):  # entries count as walked: a folder as big
        read_members(deep, "payload file", caps=Caps(records=2))  # as a disk is refused before it is listed whole


def test_an_archive_is_capped_by_its_own_bytes_and_by_the_entries_read(tmp_path):
    from recommender.files.document import read_members

    path = tmp_path / "p.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        for name in ("one", "two", "three"):
            info = tarfile.TarInfo(name)
            info.type = tarfile.DIRTYPE
            archive.addfile(info)
        body = tarfile.TarInfo("body.txt")
        body.size = 9
        archive.addfile(body, io.BytesIO(b"a request"))
    assert read_members(path, "payload file") == [("body.txt", b"a request")]
    with pytest.raises(InputError, match="holds more than 2 requests"):
        read_members(path, "payload file", caps=Caps(records=2))
    with pytest.raises(InputError, match=r"is [0-9,]+ bytes, over the .* limit for a payload file"):
        read_members(path, "payload file", caps=Caps(bytes=100))
