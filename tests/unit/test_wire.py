"""Serving stacks in the small: the OpenAI wire format, how the gate names a stack's difference, the candidates a
stack contributes, and the target fields that only a stack uses."""

from __future__ import annotations

import math
import re

import pytest
from pydantic import ValidationError

from recommender.candidates import expand_candidates
from recommender.correctness.gate import stack_difference
from recommender.spec import ExperimentSpec
from recommender.targets.wire import KSERVE, embeddings_of, openai, openai_body


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
        ({"kind": "remote", "protocol": "grpc", "endpoint": "http://x:1"}, "'kserve' or 'openai'"),
        ({"kind": "remote", "protocol": "openai", "url": "http://x:1"}, "needs `model`"),
        ({"kind": "remote", "protocol": "openai", "url": "sagemaker://x", "model": "m"}, "needs an http(s)://"),
        ({"kind": "infinity", "engines": ["tensorrt"]}, "'torch' or 'optimum'"),
    ],
)
def test_a_stack_field_in_the_wrong_place_is_refused_with_the_fix(target: dict, words: str) -> None:
    with pytest.raises(ValidationError, match=re.escape(words)):
        ExperimentSpec.model_validate({"name": "stacks", "target": target})
