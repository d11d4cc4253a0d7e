"""Prompts for a generative endpoint (load/prompts.py): synthetic prompts that re-tokenize to their drawn lengths,
shared prefixes, seeds, a local tokenizer only; prompts from the user's file (`prompt` / `messages` rows); refusals
through `recommender validate` (exit 2, one line naming the file and the line); the reuse key follows the prompts."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml

from recommender.cli import main
from recommender.files.tokenizer import read_tokenizer
from recommender.job.protocol import protocol_fingerprint, stored_sent
from recommender.load import prompts as prompts_module
from recommender.load.payload import request_token_ids, token_ids
from recommender.load.payload_source import payload_fingerprint
from recommender.load.prompts import DEFAULT_OUTPUT_TOKENS, TOLERANCE, Prompt, prompts_fingerprint, prompts_for
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import ExperimentSpec, PayloadSpec, load_spec

VERSIONS = {"locust": "x"}
GENERATION = {"input_tokens": {"mean": 120, "stddev": 30}, "output_tokens": {"mean": 64, "stddev": 8}, "count": 40}


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("COLUMNS", "500")  # rich wraps at the terminal width: keep each message on one line
    monkeypatch.delenv("RECOMMENDER_DB_URL", raising=False)
    monkeypatch.chdir(tmp_path)


CHAT_TARGET = {"kind": "remote", "protocol": "openai-chat", "url": "http://127.0.0.1:9/v1", "model": "m"}


def write(tmp_path: Path, payload: dict, traffic: dict | None = None) -> Path:
    """An experiment file whose prompts go to a generative endpoint (synthetic prompts go to no other)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "experiment.yaml"
    document = {"name": "gen", "payload": payload, "target": CHAT_TARGET} | ({"traffic": traffic} if traffic else {})
    path.write_text(yaml.safe_dump(document))
    return path


def prompts(tmp_path: Path, generation: dict) -> list[Prompt]:
    path = write(tmp_path, {"generation": generation})
    return prompts_for(load_spec(path), path.parent)


def validate(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        main(["validate", str(path)])
    return int(done.value.code or 0), capsys.readouterr().err


def counted(text: str) -> int:
    return len(read_tokenizer(minilm_dir()).encode(text, add_special_tokens=False).ids)


# --- synthetic prompts -------------------------------------------------------------------------------------------


def test_synthetic_prompts_re_tokenize_to_their_drawn_lengths(tmp_path: Path) -> None:
    made = prompts(tmp_path, GENERATION)
    assert len(made) == 40 and all(p.messages is None and p.text for p in made)
    for prompt in made:  # counted again here, independently of the prompt's own figure
        assert abs(counted(prompt.text or "") - prompt.input_tokens) <= TOLERANCE
        # the encoder path's tokenization ([CLS] and [SEP] around the same tokens) agrees
        assert len(token_ids(prompt.text or "", 100_000)) == counted(prompt.text or "") + 2
    inputs = np.array([p.input_tokens for p in made])
    outputs = np.array([p.output_tokens for p in made])
    assert len(set(inputs.tolist())) > 10  # drawn, not all the mean
    assert abs(inputs.mean() - 120) < 3 * 30 / np.sqrt(40) and 15 < inputs.std() < 45
    assert abs(outputs.mean() - 64) < 3 * 8 / np.sqrt(40) and outputs.min() >= 1


def test_a_stddev_of_0_gives_every_prompt_the_mean_exactly(tmp_path: Path) -> None:
    made = prompts(tmp_path, {"input_tokens": {"mean": 37}, "output_tokens": {"mean": 5}, "count": 10})
    assert {p.input_tokens for p in made} == {37} and {p.output_tokens for p in made} == {5}
    assert {counted(p.text or "") for p in made} == {37}


def test_lengths_are_clipped_to_at_least_one_token(tmp_path: Path) -> None:
    made = prompts(
        tmp_path, {"input_tokens": {"mean": 2, "stddev": 20}, "output_tokens": {"mean": 1, "stddev": 20}, "count": 60}
    )
    assert min(p.input_tokens for p in made) == 1 and min(p.output_tokens for p in made) == 1


def test_the_prompts_are_distinct_and_the_same_seed_repeats_them(tmp_path: Path) -> None:
    first = prompts(tmp_path / "a", GENERATION | {"seed": 7})
    again = prompts(tmp_path / "b", GENERATION | {"seed": 7})
    other = prompts(tmp_path / "c", GENERATION | {"seed": 8})
    assert len({p.text for p in first}) == len(first)
    assert first == again and [p.text for p in other] != [p.text for p in first]


def test_shared_prefixes_open_the_prompts_in_turn(tmp_path: Path) -> None:
    made = prompts(tmp_path, GENERATION | {"prefix": {"tokens": 50, "count": 3}})
    opening = [" ".join((p.text or "").split()[:50]) for p in made]
    assert len(set(opening)) == 3
    assert all(opening[k] == opening[k % 3] for k in range(len(made)))  # round robin
    assert all(counted(text) == 50 for text in set(opening))
    assert all(p.input_tokens > 50 for p in made)  # a part of its own after the prefix
    assert len({" ".join((p.text or "").split()[50:]) for p in made}) == len(made)


def test_a_payload_over_the_recount_budget_is_counted_in_a_spread_and_still_exact(tmp_path, monkeypatch) -> None:
    whole = prompts(tmp_path / "a", GENERATION)
    monkeypatch.setattr(prompts_module, "VERIFY_TOKENS", 500)  # 40 prompts of ~120 tokens: about 4 are recounted
    prompts_module._synthetic.cache_clear()
    spread = prompts(tmp_path / "b", GENERATION)
    assert spread == whole
    assert all(counted(p.text or "") == p.input_tokens for p in spread)


def test_a_tokenizer_folder_is_read_and_a_hub_name_is_refused(tmp_path: Path, capsys) -> None:
    folder = tmp_path / "tok"
    folder.mkdir()
    shutil.copy(minilm_dir() / "tokenizer.json", folder / "tokenizer.json")
    made = prompts(tmp_path, GENERATION | {"tokenizer": "tok"})
    assert made == prompts(tmp_path, GENERATION)  # the same tokenizer, the same prompts
    code, err = validate(capsys, write(tmp_path, {"generation": GENERATION | {"tokenizer": "meta-llama/Llama-3-8B"}}))
    assert code == 2 and "Traceback" not in err
    assert "payload.generation.tokenizer:" in err and "is not a folder" in err and "never a hub name" in err
    (folder / "tokenizer.json").write_text('{"not": "a tokenizer"}')
    code, err = validate(capsys, write(tmp_path, {"generation": GENERATION | {"tokenizer": "tok"}}))
    assert code == 2 and "tokenizer.json: is not a tokenizer the tokenizers library reads" in err
    (folder / "tokenizer.json").unlink()
    code, err = validate(capsys, write(tmp_path, {"generation": GENERATION | {"tokenizer": "tok"}}))
    assert code == 2 and "holds no tokenizer.json" in err


def word_level_tokenizer(folder: Path, words: list[str], joins: str | None = None) -> None:
    """A tokenizer of one token per word; `joins`: a word that its normalizer glues to the next one (the pair is one
    token), so that words no longer compose (as a BPE merging across spaces would)."""
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0} | {w: k + 1 for k, w in enumerate(words)}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    if joins is not None:
        tokenizer.normalizer = normalizers.Replace(Regex(f"\\b{joins} "), joins)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(tokenizer.to_str())


def test_a_tokenizer_whose_words_do_not_compose_is_fitted_to_the_length(tmp_path: Path) -> None:
    words = [a + b for a in "abcdefgh" for b in "abcdefghijklmnop"]
    word_level_tokenizer(tmp_path / "glue", words, joins="aa")
    made = prompts(tmp_path, GENERATION | {"tokenizer": "glue"})
    tokenizer = read_tokenizer(tmp_path / "glue")
    for prompt in made:
        again = len(tokenizer.encode(prompt.text or "", add_special_tokens=False).ids)
        assert again == prompt.input_tokens
    assert any(len((p.text or "").split()) > p.input_tokens for p in made)  # glued words were made up for
    drawn = prompts(tmp_path / "plain", GENERATION)
    assert abs(np.mean([p.input_tokens for p in made]) - np.mean([p.input_tokens for p in drawn])) < 1


def test_validate_makes_the_prompts_and_refuses_what_the_run_would(tmp_path: Path, capsys) -> None:
    word_level_tokenizer(tmp_path / "few", [a + b for a in "ab" for b in "abcdefghijklmnopqrstuvwxy"])
    code, err = validate(capsys, write(tmp_path, {"generation": GENERATION | {"tokenizer": "few"}}))
    assert code == 2 and "Traceback" not in err
    assert "payload.generation: " in err and "few: the tokenizer has 50 plain words that are one token each" in err
    short = {"input_tokens": {"mean": 1}, "output_tokens": {"mean": 1}, "count": 30_000}
    code, err = validate(capsys, write(tmp_path, {"generation": short}))
    assert code == 2 and "payload.generation: cannot make 30,000 distinct prompts of about 1 tokens" in err
    word_level_tokenizer(tmp_path / "enough", [a + b for a in "abcdefgh" for b in "abcdefghijklmnop"])
    code, err = validate(capsys, write(tmp_path, {"generation": GENERATION | {"tokenizer": "enough"}}))
    assert code == 0, err
    made = prompts(tmp_path, GENERATION | {"tokenizer": "enough"})  # another tokenizer's words, counted by it
    assert all(len((p.text or "").split()) == p.input_tokens for p in made) and made != prompts(tmp_path, GENERATION)


@pytest.mark.parametrize(
    ("generation", "says"),
    [
        (GENERATION | {"prefix": {"tokens": 120}}, "prefix.tokens (120) must be shorter than input_tokens.mean (120)"),
        (GENERATION | {"prefix": {"tokens": 10, "count": 41}}, "prefix.count (41) is more than the prompts (count 40)"),
        ({"input_tokens": {"mean": 10, "stddev": -1}, "output_tokens": {"mean": 5}}, "input_tokens.stddev"),
        ({"input_tokens": {"mean": 0}, "output_tokens": {"mean": 5}}, "input_tokens.mean"),
        ({"input_tokens": {"mean": 10}}, "give output_tokens (mean and stddev in tokens)"),
        ({"output_tokens": {"mean": 40000}, "input_tokens": {"mean": 5}}, "over the 32,768 tokens a request may ask"),
        (GENERATION | {"count": 0}, "payload.generation.count"),
        (
            GENERATION | {"count": 100_000, "input_tokens": {"mean": 201}},
            "20,100,000 prompt tokens, over the 20,000,000",
        ),
        (GENERATION | {"temperature": 1}, "payload.generation.temperature: unknown key"),
    ],
)
def test_a_generation_that_cannot_work_exits_2_naming_the_field(tmp_path: Path, capsys, generation, says) -> None:
    code, err = validate(capsys, write(tmp_path, {"generation": generation}))
    assert code == 2 and "Traceback" not in err
    assert says in err


@pytest.mark.parametrize(
    ("payload", "says"),
    [
        ({"generation": GENERATION, "texts": ["a"]}, "give either `generation` or `texts`, not both"),
        ({"generation": GENERATION, "file": "p.jsonl"}, "give either `generation` or `file`, not both"),
        ({"generation": GENERATION, "sequence_length": 64}, "a generative payload has none"),
    ],
)
def test_generation_beside_other_prompts_is_refused(tmp_path: Path, capsys, payload, says) -> None:
    (tmp_path / "p.jsonl").write_text('{"prompt": "hi"}\n')
    code, err = validate(capsys, write(tmp_path, payload))
    assert code == 2 and says in err


# --- prompts from the user's file --------------------------------------------------------------------------------


ROWS = [
    {"prompt": "Write a haiku about load testing.", "output_tokens": 48},
    {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is TTFT?"}]},
    {"prompt": "Summarise the design.", "max_tokens": 200},
    {"text": "a plain text row"},
]


def test_file_rows_with_prompts_and_messages_become_prompts_in_order(tmp_path: Path) -> None:
    (tmp_path / "chat.jsonl").write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    path = write(tmp_path, {"file": "chat.jsonl"})
    made = prompts_for(load_spec(path), tmp_path)
    assert [p.text for p in made] == [ROWS[0]["prompt"], None, ROWS[2]["prompt"], "a plain text row"]
    assert made[1].messages == tuple(ROWS[1]["messages"])
    assert [p.output_tokens for p in made] == [48, DEFAULT_OUTPUT_TOKENS, 200, DEFAULT_OUTPUT_TOKENS]
    assert made[0].input_tokens == counted(ROWS[0]["prompt"])
    assert made[1].input_tokens == counted("Be brief.\nWhat is TTFT?")
    # an encoder is sent a chat row's contents, one a line
    assert request_token_ids(load_spec(path).payload)[1] == token_ids("Be brief.\nWhat is TTFT?", 512)


def test_the_packaged_texts_are_prompts_too(tmp_path: Path) -> None:
    made = prompts_for(ExperimentSpec.model_validate({"name": "t"}), tmp_path)
    assert [p.text for p in made] == list(PayloadSpec().texts)
    assert {p.output_tokens for p in made} == {DEFAULT_OUTPUT_TOKENS}


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ({"prompt": "x", "messages": [{"role": "user", "content": "y"}]}, "holds both `prompt` and `messages`"),
        ({"messages": []}, "`messages` is not a non-empty list of chat messages"),
        ({"messages": "hi"}, "`messages` is not a non-empty list of chat messages"),
        ({"messages": [{"role": "robot", "content": "y"}]}, 'messages[0]: role "robot" is not one of system'),
        ({"messages": [{"role": "user", "content": ""}]}, "messages[0]: `content` is not a non-empty text"),
        ({"messages": [{"role": "user", "content": [{"type": "text"}]}]}, "`content` is not a non-empty text"),
        ({"messages": ["hi"]}, "messages[0]: is a JSON str, not a message of role and content"),
        ({"prompt": "x", "output_tokens": 0}, "`output_tokens` is 0, not a whole number of tokens from 1 to 32,768"),
        ({"prompt": "x", "max_tokens": "many"}, '`max_tokens` is "many", not a whole number of tokens'),
        ({"prompt": "x", "max_tokens": True}, "`max_tokens` is true, not a whole number of tokens"),
        ({"prompt": "x", "max_tokens": 3, "output_tokens": 3}, "holds both `output_tokens` and `max_tokens`"),
        ({"output_tokens": 3}, "gives an output length and no prompt"),
        ({"prompt": ""}, "`prompt` is empty, not a text"),
    ],
)
def test_a_bad_prompt_row_exits_2_with_one_line_naming_the_file_and_line(tmp_path: Path, capsys, row, says) -> None:
    (tmp_path / "chat.jsonl").write_text(json.dumps(ROWS[0]) + "\n\n" + json.dumps(row) + "\n")
    code, err = validate(capsys, write(tmp_path, {"file": "chat.jsonl"}))
    assert code == 2 and "Traceback" not in err
    problem = next(line for line in err.splitlines() if "chat.jsonl: line" in line)
    assert "chat.jsonl: line 3: " in problem and says in problem


# --- what is sent, in the reuse key ------------------------------------------------------------------------------


def test_the_payload_fingerprint_covers_messages_and_output_lengths(tmp_path: Path) -> None:
    def fingerprint(rows: list[dict]) -> str:
        (tmp_path / "chat.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        return payload_fingerprint(load_spec(write(tmp_path, {"file": "chat.jsonl"})).payload)

    base = fingerprint(ROWS)
    assert fingerprint(ROWS) == base
    assert fingerprint([ROWS[0] | {"output_tokens": 49}, *ROWS[1:]]) != base
    changed = {"messages": [{"role": "system", "content": "Be long."}, {"role": "user", "content": "What is TTFT?"}]}
    assert fingerprint([ROWS[0], changed, *ROWS[2:]]) != base


def test_the_reuse_key_follows_the_synthetic_prompts(tmp_path: Path) -> None:
    def key(folder: str, generation: dict) -> str:
        return protocol_fingerprint(load_spec(write(tmp_path / folder, {"generation": generation})), VERSIONS)

    base = key("a", GENERATION)
    assert key("b", GENERATION) == base  # the same prompts wherever the experiment lies
    assert key("a", GENERATION | {"seed": 1}) != base
    assert key("a", GENERATION | {"count": 41}) != base
    assert key("a", GENERATION | {"prefix": {"tokens": 20}}) != base


def test_a_run_stores_the_prompts_it_sends(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, {"generation": GENERATION | {"seed": 4}}))
    stored = stored_sent(spec)
    made = prompts_for(spec, tmp_path)
    assert (stored.requests, stored.source) == (40, "synthetic prompts (seed 4)")
    assert stored.mean_tokens == pytest.approx(np.mean([p.input_tokens for p in made]))
    assert stored.fingerprint == prompts_fingerprint(made)
    (tmp_path / "q.txt").write_text("one\ntwo\n")
    assert stored_sent(load_spec(write(tmp_path, {"file": "q.txt"}))).source == "q.txt"  # a payload as before


def test_a_payload_without_generation_keeps_its_dump(tmp_path: Path) -> None:
    """No `generation` leaves the payload as it was stored before prompts existed (stored keys stay valid)."""
    assert "generation" not in PayloadSpec().model_dump(mode="json")
