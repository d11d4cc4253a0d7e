"""KServe v2's binary tensor extension (issue 37 item 9): a JSON body encoded as Triton's clients send it, the
JSON header first (each input with its binary_data_size, answers kept JSON), then the raw little-endian values."""

from __future__ import annotations

import json
import struct

import pytest
from pydantic import ValidationError

from recommender.job.protocol import protocol_fingerprint
from recommender.load.payload import batch_body
from recommender.spec import ExperimentSpec
from recommender.targets.kserve_binary import CONTENT_TYPE, HEADER_LENGTH, binary_request


def test_a_body_is_its_json_header_then_its_inputs_raw_little_endian():
    body = batch_body([[101, 7, 102, 0]], [[1, 1, 1, 0]])
    data, headers = binary_request(body)
    length = int(headers[HEADER_LENGTH])
    header = json.loads(data[:length])
    assert headers["Content-Type"] == CONTENT_TYPE
    assert header["parameters"] == {"binary_data_output": False}  # answers stay JSON
    assert [(i["name"], i["shape"], i["datatype"]) for i in header["inputs"]] == [
        (i["name"], i["shape"], i["datatype"]) for i in body["inputs"]
    ]
    assert all("data" not in i for i in header["inputs"])
    sizes = [i["parameters"]["binary_data_size"] for i in header["inputs"]]
    assert sizes == [8 * 4, 8 * 4] and len(data) == length + sum(sizes)
    raw = data[length:]
    assert list(struct.unpack("<4q", raw[:32])) == [101, 7, 102, 0]
    assert list(struct.unpack("<4q", raw[32:])) == [1, 1, 1, 0]
    assert body["inputs"][0]["data"] == [101, 7, 102, 0]  # the JSON body itself is left as it was


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"model": "m", "input": ["a text"]}, "KServe v2 body with `inputs`"),
        ({"inputs": [{"name": "t", "shape": [1], "datatype": "BYTES", "data": ["x"]}]}, "datatype 'BYTES'"),
    ],
)
def test_what_cannot_be_binary_tensors_is_refused_with_the_reason(body, says):
    with pytest.raises(ValueError) as refused:
        binary_request(body)
    assert says in str(refused.value)


def test_binary_is_refused_for_a_target_that_takes_text():
    spec = {"name": "t", "target": {"kind": "infinity"}, "traffic": {"request_encoding": "binary"}}
    with pytest.raises(ValidationError, match="request_encoding: binary sends KServe v2 binary tensors"):
        ExperimentSpec.model_validate(spec)


def test_the_encoding_is_in_the_reuse_key_and_json_keeps_the_old_key():
    versions = {"torch": "1"}
    plain = protocol_fingerprint(ExperimentSpec.model_validate({"name": "t"}), versions)
    json_ = protocol_fingerprint(
        ExperimentSpec.model_validate({"name": "t", "traffic": {"request_encoding": "json"}}), versions
    )
    binary = protocol_fingerprint(
        ExperimentSpec.model_validate({"name": "t", "traffic": {"request_encoding": "binary"}}), versions
    )
    assert plain == json_ != binary
