"""Serving stacks in the small: the OpenAI wire format, how the gate names a stack's difference, the candidates a
stack contributes, and the target fields that only a stack uses."""

from __future__ import annotations

import json
import math
import re

import pytest
from pydantic import ValidationError

from recommender.candidates import expand_candidates
from recommender.correctness.gate import stack_difference
from recommender.spec import ExperimentSpec
from recommender.targets.wire import KSERVE, answer_problem, embeddings_of, openai, openai_body, rows_asked


def test_the_two_wires_post_where_their_servers_listen_and_know_a_good_answer() -> None:
    assert KSERVE.path("model") == "/v2/models/model/infer" and KSERVE.answer_key == "outputs"
    assert openai("/v1/").path("ignored") == "/v1/embeddings" and openai().answer_key == "data"
    assert openai().takes_text and not KSERVE.takes_text
    assert openai_body("minilm", ("a", "b")) == {"model": "minilm", "input": ["a", "b"]}


def test_embeddings_come_back_in_input_order_and_a_bad_answer_says_what_is_wrong() -> None:
    answer = {"data": [{"index": 1, "embedding": [0.0, 1.0]}, {"index": 0, "embedding": [1, 0]}]}
    assert embeddings_of(answer, 2) == [[1.0, 0.0], [0.0, 1.0]]
    with pytest.raises(ValueError, match="expected `data` with 3 embeddings, got 2 rows"):
        embeddings_of(answer, 3)
    with pytest.raises(ValueError, match="no `data` list"):
        embeddings_of({"error": "overloaded"}, 1)
    with pytest.raises(ValueError, match="base64"):
        embeddings_of({"data": [{"index": 0, "embedding": "AAAA"}]}, 1)


def test_the_gate_names_what_a_stack_does_differently() -> None:
    reference = [[0.6, 0.8, 0.0], [0.0, 0.6, 0.8]]
    assert stack_difference(reference, reference) is None
    unnormalized = [[3 * x for x in row] for row in reference]
    assert "normalizes differently" in str(stack_difference(unnormalized, reference))
    cls_pooled = [[0.8, -0.6, 0.0], [0.0, 0.6, 0.8]]
    said = str(stack_difference(cls_pooled, reference))
    assert "pools or tokenizes differently" in said and f"{0.6 * 0.8 - 0.8 * 0.6:.3f}" in said
    assert stack_difference([[1.0, 0.0]], reference) == "the stack returns 2-dimensional rows, the reference 3"
    assert math.isclose(sum(x * x for x in reference[0]), 1.0)


def spec(targets: list[dict]) -> ExperimentSpec:
    grid = {"optimizations": ["pt"], "dynamic_batching": [False], "instance_group_counts": [1], "max_batch_sizes": [8]}
    return ExperimentSpec.model_validate({"name": "stacks", "variants": grid, "targets": targets})


def test_each_stack_brings_its_own_candidates_and_the_triton_grid_stays_triton_s() -> None:
    names = [
        c.name
        for c in expand_candidates(
            spec(
                [
                    {"kind": "local", "name": "triton"},
                    {"kind": "infinity", "name": "inf", "engines": ["torch", "optimum"], "batch_sizes": [8, 32]},
                    {"kind": "remote", "name": "tei", "protocol": "openai", "url": "http://127.0.0.1:1", "model": "m"},
                ]
            )
        )
    ]
    assert names == [
        "pt-nodb-ig1-mbs8@triton",
        "torch-mbs8@inf",
        "torch-mbs32@inf",
        "optimum-mbs8@inf",
        "optimum-mbs32@inf",
        "openai-endpoint@tei",
    ]


@pytest.mark.parametrize(
    "target, words",
    [
        ({"kind": "local", "engines": ["optimum"]}, "engines not used by target kind local"),
        (
            {"kind": "remote", "protocol": "grpc", "endpoint": "http://x:1"},
            "'kserve', 'openai', 'openai-chat' or 'openai-completions'",
        ),
        ({"kind": "remote", "protocol": "openai", "url": "http://x:1"}, "needs `model`"),
        ({"kind": "remote", "protocol": "openai", "url": "sagemaker://x", "model": "m"}, "needs an http(s)://"),
        ({"kind": "infinity", "engines": ["tensorrt"]}, "'torch' or 'optimum'"),
    ],
)
def test_a_stack_field_in_the_wrong_place_is_refused_with_the_fix(target: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(words)):
        ExperimentSpec.model_validate({"name": "stacks", "target": target})


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (
            [{"index": "1", "embedding": [1.0]}, {"index": 0, "embedding": [0.0]}],
            r"the rows' `index` values \['1', 0\]",
        ),
        ([{"index": None, "embedding": [1.0]}, {"index": 0, "embedding": [0.0]}], "are not 0 to 1, each once"),
        ([{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [0.0]}], r"values \[0, 0\] are not 0 to 1"),
        ([{"index": True, "embedding": [1.0]}, {"index": 0, "embedding": [0.0]}], r"values \[True, 0\]"),
        (
            [{"index": 0, "embedding": [1.0, 2.0]}, {"index": 1, "embedding": [0.0]}],
            "ragged: embeddings of 1, 2 numbers",
        ),
        ([{"index": 0, "embedding": [1.0]}, "row"], "a row of `data` is not an object"),
    ],
)
def test_an_answer_of_the_wrong_shape_is_one_reason_never_a_type_error(data: list, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        embeddings_of({"data": data}, 2)


def test_rows_without_an_index_keep_their_order() -> None:
    assert embeddings_of({"data": [{"embedding": [1]}, {"embedding": [2]}]}, 2) == [[1.0], [2.0]]


def test_a_request_asks_for_its_rows_on_either_wire() -> None:
    assert rows_asked(openai_body("m", ["a", "b", "c"])) == 3
    assert rows_asked({"inputs": [{"name": "input_ids", "shape": [4, 16], "datatype": "INT64", "data": []}]}) == 4
    assert rows_asked({"inputs": "garbled"}) == 1


GOOD_KSERVE = {"outputs": [{"name": "embedding", "shape": [2, 2], "data": [1, 2, 3, 4]}]}


@pytest.mark.parametrize(
    ("key", "answer", "rows", "reason"),
    [
        ("data", b'{"data": []}', 1, "expected `data` with 1 embeddings, got 0 rows"),
        ("data", b'{"data": [{"index": 0, "embedding": []}]}', 1, "no `embedding` list of numbers"),
        ("data", b'{"error": "the \\"data\\" is gone"}', 1, "no `data` list"),
        ("data", b"<html>data</html>", 1, r"the answer is not JSON \(<html>data</html>\)"),
        ("outputs", b'{"outputs": []}', 2, "expected `outputs` with 2 rows"),
        ("outputs", b'{"error": "no \\"outputs\\""}', 2, "expected `outputs` with 2 rows"),
        ("outputs", json.dumps({"outputs": [{"name": "e", "shape": [1, 2], "data": [1, 2]}]}).encode(), 2,
         r"output 'e' has 1 rows \(shape \[1, 2\]\), the request asked for 2"),
        ("outputs", json.dumps({"outputs": [{"name": "e", "shape": [2, 2], "data": [1, 2]}]}).encode(), 2,
         r"output 'e' has shape \[2, 2\] and 2 values, not 4 values"),
        ("outputs", json.dumps({"outputs": [{"name": "e", "shape": "2x2"}]}).encode(), 2, "no shape of whole numbers"),
        ("outputs", b"[" * 100_000, 2, "the answer is not JSON"),
    ],
)  # fmt: skip
def test_a_malformed_answer_is_not_good_and_says_why_in_one_line(
    key: str, answer: bytes, rows: int, reason: str
) -> None:
    found = answer_problem(key, answer, rows)
    assert found is not None and re.search(reason, found) and "\n" not in found


def test_an_answer_with_the_rows_asked_for_is_good() -> None:
    assert answer_problem("outputs", json.dumps(GOOD_KSERVE).encode(), 2) is None
    openai_answer = {"data": [{"index": 1, "embedding": [0.5]}, {"index": 0, "embedding": [1]}]}
    assert answer_problem("data", json.dumps(openai_answer).encode(), 2) is None
