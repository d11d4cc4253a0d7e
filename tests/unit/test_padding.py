"""variants.padding (issue 36 item 3): how each request is padded on the wire (max, buckets, none), what it does to
the candidates, their keys and their Triton configs, and a wrong value refused with one line and exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.candidates import Candidate, expand_candidates, model_fingerprint
from recommender.job.protocol import protocol_fingerprint
from recommender.load.payload import (
    MODEL_MAX_TOKENS,
    inference_bodies,
    max_length,
    padded_length,
    request_lengths,
    request_texts,
    request_token_ids,
    token_ids,
    truncation_cap,
)
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.repository import render_config
from recommender.spec import ExperimentSpec, PayloadSpec

TEXTS = ["a", "a b c", "a b c d e f g h i j", "a b c d e f g h i j k l m n o p q r s t"]  # 3, 5, 12, 22 tokens


def widths(bodies: list[dict]) -> list[int]:
    return [body["inputs"][0]["shape"][1] for body in bodies]


def test_max_pads_every_request_to_the_payloads_longest_request_by_default() -> None:
    payload = PayloadSpec(texts=TEXTS)
    lengths = request_lengths(payload)
    assert lengths == [3, 5, 12, 22] and max_length(payload) == max(lengths)
    assert widths(inference_bodies(payload, "max")) == [22] * 4
    assert truncation_cap(payload) == MODEL_MAX_TOKENS


def test_a_set_sequence_length_is_the_fixed_length_max_pads_to_and_truncates_at() -> None:
    """An experiment that sets sequence_length keeps its workload (every request at that length: the experiment
    files of today, so their stored results resume); a longer request is truncated there."""
    payload = PayloadSpec(texts=TEXTS, sequence_length=16)
    assert request_lengths(payload) == [3, 5, 12, 16] and max_length(payload) == 16
    assert widths(inference_bodies(payload, "max")) == [16] * 4
    body = inference_bodies(payload, "max")[0]["inputs"]
    assert body[1]["data"] == [1, 1, 1] + [0] * 13 and body[0]["data"][3:] == [0] * 13


def test_buckets_pad_to_the_next_power_of_two_at_most_the_max_and_none_to_their_own_length() -> None:
    payload = PayloadSpec(texts=TEXTS)
    assert widths(inference_bodies(payload, "buckets")) == [4, 8, 16, 22]
    assert widths(inference_bodies(payload, "none")) == [3, 5, 12, 22]
    assert [padded_length(n, "buckets", 64) for n in (1, 2, 3, 16, 17, 33)] == [1, 2, 4, 16, 32, 64]
    with pytest.raises(ValueError, match="unknown padding 'left'"):
        padded_length(3, "left", 8)


def test_every_padding_sends_the_same_tokens() -> None:
    payload = PayloadSpec(texts=TEXTS)
    rows = request_token_ids(payload)
    for padding in ("max", "buckets", "none"):
        for body, ids in zip(inference_bodies(payload, padding), rows, strict=True):
            sent, mask = (tensor["data"] for tensor in body["inputs"])
            assert [token for token, kept in zip(sent, mask, strict=True) if kept] == ids


def test_a_server_that_tokenizes_is_sent_the_same_requests_as_text() -> None:
    """Infinity and OpenAI servers are sent the requests decoded from the same token ids (truncated where Triton's
    are), so they tokenize them to the same ids at the same lengths."""
    payload = PayloadSpec(texts=["Serving models at scale, quickly!", *TEXTS], sequence_length=8)
    for text, ids in zip(request_texts(payload), request_token_ids(payload), strict=True):
        assert token_ids(text, MODEL_MAX_TOKENS) == ids


def spec(**variants) -> ExperimentSpec:
    return ExperimentSpec(name="x", variants={"optimizations": ["pt"], "dynamic_batching": [False]} | variants)


def test_padding_is_an_axis_of_the_grid_and_max_keeps_the_keys_it_had() -> None:
    found = expand_candidates(spec(padding=["max", "buckets", "none"]))
    assert [c.padding for c in found] == ["max", "buckets", "none"]
    assert [c.name for c in found] == ["pt-nodb-ig1-mbs8", "pt-nodb-ig1-mbs8-buckets", "pt-nodb-ig1-mbs8-none"]
    (alone,) = expand_candidates(spec())
    assert alone == found[0] and "padding" not in alone.config()
    assert alone.key == Candidate("pt", None, 1, 8, "local-cpu", model_fingerprint(spec())).key
    assert len({c.key for c in found}) == 3
    assert [Candidate.from_config(c.config()) for c in found] == found


def test_a_set_sequence_length_keeps_its_keys_and_the_default_payload_changes_them() -> None:
    """Pinned on the code before variants.padding (ac6956f): an experiment that sets sequence_length (every file
    under experiments/) measures what it measured, under the same model fingerprint and protocol key, so its stored
    runs resume. The default payload now pads `max` to its longest request, not to 128: another workload, other
    keys. Never update these values to make a test pass."""
    fixed = ExperimentSpec(name="x", payload={"sequence_length": 128})
    assert model_fingerprint(fixed) == "3d7e0bf2e14f1c65"
    assert protocol_fingerprint(fixed, versions={"a": "1"}) == "4d3d99c7ee3e7f44"
    default = ExperimentSpec(name="x")
    assert model_fingerprint(default) != model_fingerprint(fixed)
    assert protocol_fingerprint(default, versions={"a": "1"}) != protocol_fingerprint(fixed, versions={"a": "1"})


def test_none_marks_the_inputs_ragged_in_the_python_backend_config(tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    path.write_bytes(b"x")
    inputs = tuple(TensorSpec(name, "TYPE_INT64", (-1,)) for name in ("input_ids", "attention_mask"))
    artifact = ModelArtifact(path, "torchscript", inputs, (TensorSpec("embedding", "TYPE_FP32", (384,)),))
    texts = {
        p: render_config(Candidate("pt", None, 1, 8, "local", padding=p), artifact, "m", 1) for p in ("max", "none")
    }
    assert texts["none"].count("allow_ragged_batch: true") == 2 and "allow_ragged_batch" not in texts["max"]


def test_a_wrong_padding_exits_2_with_one_line(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("name: x\nvariants:\n  padding: [max, left]\n")
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "500"},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "variants.padding" in done.stderr and "'max', 'buckets' or 'none'" in done.stderr


def test_the_dry_run_table_shows_the_padding_where_the_grid_asks_for_one() -> None:
    from rich.console import Console

    from recommender.cli.plan import plan_table

    def rendered(**variants) -> str:
        console = Console(width=300, record=True)
        console.print(plan_table(spec(**variants)))
        return console.export_text()

    text = rendered(padding=["max", "none"])
    assert "padding" in text and "pt-nodb-ig1-mbs8-none" in text
    assert [line.split("│")[7].strip() for line in text.splitlines() if "pt-nodb" in line] == ["max", "none"]
    assert "padding" not in rendered()  # a grid of max only reads as it did


def test_the_deliverable_says_how_clients_must_pad() -> None:
    from recommender.report.deliverable import padding_note

    assert padding_note("max", native=False).startswith("pad every request to the payload's max length")
    assert "next power of two" in padding_note("buckets", native=True)
    assert "ragged batches and model.py pads" in padding_note("none", native=False)
    assert "one length only" in padding_note("none", native=True)


def test_the_sampler_searches_the_padding_too() -> None:
    """Adaptive search over ranges: the padding is one of the sampler's parameters (a choice of one is left out, so a
    seeded search without padding proposes what it proposed before)."""
    from recommender.search.sampler import Sampler

    searched = ExperimentSpec(
        name="x",
        variants={"optimizations": ["pt"], "max_batch_sizes": {"range": [1, 8]}, "padding": ["max", "none"]},
        search={"strategy": "adaptive", "seed": 1},
    )
    sampler = Sampler(searched)
    proposed = [sampler.ask() for _ in range(12)]
    for candidate in proposed:
        assert candidate is not None
        sampler.tell(candidate, 1.0)
    assert {c.padding for c in proposed if c is not None} == {"max", "none"}
    assert "padding" in sampler.study.trials[0].params
    alone = Sampler(searched.model_copy(update={"variants": searched.variants.model_copy(update={"padding": ["max"]})}))
    assert alone.ask() is not None
    assert "padding" not in alone.study.trials[0].params and "max_batch_sizes" in alone.study.trials[0].params
