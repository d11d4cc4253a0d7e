"""Binary tensors against the real tritonserver (issue 37 item 9): a request in KServe's binary tensor extension is
answered as its JSON twin is (the same outputs, as JSON), and a Locust load run with request_encoding binary sends
only good requests (Triton counts them as successes)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from recommender.load.payload import batch_body
from recommender.load.runner import LoadRequest, run_load
from recommender.load.shapes import compile_traffic
from recommender.spec.traffic import TrafficSpec
from recommender.targets.kserve_binary import binary_request
from recommender.targets.registry import get_target

pytestmark = pytest.mark.integration


def post(url: str, data: bytes, headers: dict[str, str]) -> dict:
    request = urllib.request.Request(url, data=data, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise AssertionError(f"HTTP {error.code}: {error.read()[:300]!r}") from None


def test_binary_requests_are_answered_like_json_and_a_load_run_sends_them(tmp_path: Path, repository_for):
    target = get_target("local", ready_timeout=90)
    target.preflight()
    deployment = target.deploy(repository_for("pt"), "model", tmp_path / "run")
    try:
        body = batch_body([[3, 7, 11, 2]], [[1, 1, 1, 1]])
        url = f"{deployment.endpoint}/v2/models/model/infer"
        as_json = post(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
        data, headers = binary_request(body)
        as_binary = post(url, data, headers)
        assert as_binary["outputs"] == as_json["outputs"]

        before = deployment.statistics()["model_stats"][0]["inference_stats"]["success"]["count"]
        traffic = TrafficSpec.model_validate(
            {"warmup_seconds": 0, "phases": [{"initial_users": 2, "duration_seconds": 3}]}
        )
        request = LoadRequest(
            endpoint=deployment.endpoint,
            model_name="model",
            bodies=[body, batch_body([[5, 1, 4, 0]], [[1, 1, 1, 0]])],
            phases=compile_traffic(traffic),
            out_dir=tmp_path / "load",
            encoding="binary",
        )
        result = run_load(request)
        after = deployment.statistics()["model_stats"][0]["inference_stats"]["success"]["count"]
    finally:
        deployment.teardown()
    assert len(result.requests) > 0 and result.requests.failures == 0
    assert after - before >= len(result.requests)  # every request the load recorded, Triton served
