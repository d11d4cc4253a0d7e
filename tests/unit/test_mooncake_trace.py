"""A Mooncake-style trace (`traffic.trace.format: mooncake`): JSONL rows of a millisecond timestamp, an input and an
output length, replayed open loop with the trace machinery (files/trace.py, load/shapes.py), each send's prompt
synthesised at its row's lengths (load/prompts.py); every refusal one line naming the file and the line, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from recommender.cli import main
from recommender.files.tokenizer import read_tokenizer
from recommender.files.trace import read_trace
from recommender.job.protocol import protocol_fingerprint, stored_sent
from recommender.load.prompts import TOLERANCE, prompts_for
from recommender.load.shapes import TrafficPlan, compile_traffic
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import load_spec
from tests.unit.test_prompts import CHAT_TARGET

VERSIONS = {"locust": "x"}
ROWS = [
    {"timestamp": 0, "input_length": 40, "output_length": 12, "hash_ids": [0, 1]},
    {"timestamp": 250, "input_length": 9, "output_length": 3, "hash_ids": [0]},
    {"timestamp": 250, "input_length": 130, "output_length": 50, "hash_ids": [2, 3, 4]},
    {"timestamp": 1000, "input_length": 1, "output_length": 1, "hash_ids": []},
]


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at the terminal width: keep each message on one line
    monkeypatch.delenv("RECOMMENDER_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def experiment(folder: Path, lines: list[str], trace: dict | None = None, payload: dict | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trace.jsonl").write_text("".join(line + "\n" for line in lines))
    document = {
        "name": "mc",
        "target": CHAT_TARGET,  # a mooncake trace's prompts go to generative endpoints only
        "traffic": {"trace": {"file": "trace.jsonl", "format": "mooncake"} | (trace or {})},
    }
    path = folder / "e.yaml"
    path.write_text(yaml.safe_dump(document | ({"payload": payload} if payload else {})))
    return path


def rows(data: list[dict]) -> list[str]:
    return [json.dumps(row) for row in data]


def validate(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    return int(done.value.code or 0), capsys.readouterr().err


def test_rows_read_as_seconds_with_their_lengths_hash_ids_ignored(tmp_path: Path) -> None:
    path = experiment(tmp_path, rows(ROWS))
    trace = read_trace(path.parent / "trace.jsonl", format="mooncake")
    assert trace.times.tolist() == [0.0, 0.25, 0.25, 1.0]
    assert trace.input_lengths is not None and trace.input_lengths.tolist() == [40, 9, 130, 1]
    assert trace.output_lengths is not None and trace.output_lengths.tolist() == [12, 3, 50, 1]
    assert trace.indices is not None and trace.indices.tolist() == [0, 1, 2, 3]  # send k is sent prompt k


def test_the_replay_is_one_open_loop_level_whose_sends_pick_their_rows_prompt(tmp_path: Path) -> None:
    spec = load_spec(experiment(tmp_path, rows(ROWS), {"speedup": 2}))
    plan = compile_traffic(spec.traffic)
    assert plan.arrival == "trace" and plan.trace_format == "mooncake" and len(plan.levels) == 1
    times, indices = plan.sends()
    assert times.tolist() == [0.0, 0.125, 0.125, 0.5]
    assert indices is not None and indices.tolist() == [0, 1, 2, 3]
    assert TrafficPlan.from_json(plan.to_json()) == plan  # what the load child gets


def test_each_rows_prompt_is_synthesised_at_its_lengths(tmp_path: Path) -> None:
    path = experiment(tmp_path, rows(ROWS))
    made = prompts_for(load_spec(path), tmp_path)
    assert [p.input_tokens for p in made] == [40, 9, 130, 1]
    assert [p.output_tokens for p in made] == [12, 3, 50, 1]
    tokenizer = read_tokenizer(minilm_dir())
    for prompt, row in zip(made, ROWS, strict=True):
        again = len(tokenizer.encode(prompt.text or "", add_special_tokens=False).ids)
        assert abs(again - row["input_length"]) <= TOLERANCE
    assert stored_sent(load_spec(path)).source == "trace.jsonl: a mooncake trace's 4 rows (seed 0)"
    seeded = experiment(tmp_path / "s", rows(ROWS), payload={"generation": {"seed": 5}})
    other = prompts_for(load_spec(seeded), seeded.parent)
    assert [p.input_tokens for p in other] == [40, 9, 130, 1] and other != made


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ("[1, 2, 3]", "line 3: is a JSON list, not an object"),
        ('{"timestamp": 500, "input_length": 3', "line 3, column"),
        ('{"timestamp": "soon", "input_length": 3, "output_length": 1}', "line 3: `timestamp` is not a number"),
        ('{"timestamp": 100, "input_length": 3, "output_length": 1}', "line 3: timestamp 100 is before the previous"),
        ('{"timestamp": 500, "output_length": 1}', "line 3: `input_length` is missing, not a whole number of tokens"),
        ('{"timestamp": 500, "input_length": 0, "output_length": 1}', "line 3: `input_length` is 0, not a whole"),
        ('{"timestamp": 500, "input_length": 2.5, "output_length": 1}', "line 3: `input_length` is 2.5, not a whole"),
        (
            '{"timestamp": 500, "input_length": 3, "output_length": 40000}',
            "line 3: `output_length` is 40000, not a whole",
        ),
        (
            '{"timestamp": 500, "input_length": 3, "output_length": true}',
            "line 3: `output_length` is true, not a whole",
        ),
    ],
)
def test_a_bad_row_exits_2_with_one_line_naming_the_file_and_line(tmp_path: Path, capsys, line: str, says) -> None:
    code, err = validate(capsys, experiment(tmp_path, [*rows(ROWS[:2]), line]))
    assert code == 2 and "Traceback" not in err
    assert f"trace.jsonl: {says}" in err


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"texts": ["a", "b"]}, "a mooncake trace sends synthetic prompts at its rows' lengths; drop payload.file"),
        (
            {"generation": {"input_tokens": {"mean": 5}}},
            "payload.generation: the mooncake trace's rows give the lengths and the prompts here; drop input_tokens",
        ),
        ({"generation": {"count": 7}}, "here; drop count (keep only tokenizer and seed)"),
    ],
)
def test_a_payload_that_would_give_other_prompts_is_refused(tmp_path: Path, capsys, payload, says) -> None:
    code, err = validate(capsys, experiment(tmp_path, rows(ROWS), payload=payload))
    assert code == 2 and says in err


def test_a_trace_asking_for_more_prompt_tokens_than_are_made_before_a_run_is_refused(tmp_path: Path, capsys) -> None:
    big = [{"timestamp": k, "input_length": 131_072, "output_length": 1} for k in range(200)]
    code, err = validate(capsys, experiment(tmp_path, rows(big)))
    assert code == 2 and "trace.jsonl: line 153: the rows so far ask for 20,054,016 prompt tokens" in err


def test_a_trace_of_one_timestamp_is_refused_by_the_shared_rules(tmp_path: Path, capsys) -> None:
    code, err = validate(capsys, experiment(tmp_path, rows([ROWS[0], ROWS[0]])))
    assert code == 2 and "line 2: every timestamp is 0" in err


def test_the_reuse_key_follows_the_traces_rows_and_old_traces_keep_theirs(tmp_path: Path) -> None:
    base = protocol_fingerprint(load_spec(experiment(tmp_path / "a", rows(ROWS))), VERSIONS)
    moved = protocol_fingerprint(load_spec(experiment(tmp_path / "b", rows(ROWS))), VERSIONS)
    longer = [*ROWS[:3], ROWS[3] | {"output_length": 2}]
    edited = protocol_fingerprint(load_spec(experiment(tmp_path / "c", rows(longer))), VERSIONS)
    assert base == moved and edited != base
    seconds = load_spec(experiment(tmp_path / "d", ["0", "1"], {"format": "seconds"}))
    assert "format" not in seconds.traffic.model_dump(mode="json")["trace"]  # stored before mooncake: same key
    assert "trace_format" not in compile_traffic(seconds.traffic).to_json()  # what a load child of before reads
