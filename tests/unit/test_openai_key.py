"""An OpenAI endpoint's API key: named by `target.api_key_env`, read from the environment at preflight, sent as a
bearer token by the run's own HTTP client (readiness, model list, the correctness gate's probe), never shown. The
Locust child's requests, against a real Infinity server that requires the key: tests/integration/test_stacks.py."""

from __future__ import annotations

import json

import pytest

from recommender.errors import InputError, TargetError
from recommender.spec import ExperimentSpec
from recommender.targets.remote import RemoteTarget


def openai_target(**fields) -> RemoteTarget:
    spec = ExperimentSpec.model_validate(
        {
            "name": "k",
            "target": {"kind": "remote", "protocol": "openai", "url": "http://127.0.0.1:9/v1", "model": "m", **fields},
        }
    )
    return RemoteTarget.from_spec(spec.target, "k", "run")


def test_an_unset_key_variable_stops_the_run_at_preflight_with_exit_2_and_the_fix(monkeypatch):
    monkeypatch.delenv("RECOMMENDER_TEST_KEY", raising=False)
    with pytest.raises(InputError) as caught:
        openai_target(api_key_env="RECOMMENDER_TEST_KEY").preflight()
    assert caught.value.exit_code == 2
    assert "target.api_key_env names RECOMMENDER_TEST_KEY" in caught.value.message
    assert "export RECOMMENDER_TEST_KEY=" in (caught.value.hint or "")
    monkeypatch.setenv("RECOMMENDER_TEST_KEY", "  ")  # empty once stripped: no key either
    with pytest.raises(InputError):
        openai_target(api_key_env="RECOMMENDER_TEST_KEY").preflight()


def test_the_key_goes_in_a_bearer_header_and_never_into_a_repr(monkeypatch):
    monkeypatch.setenv("RECOMMENDER_TEST_KEY", "sk-secret-1")
    endpoint = openai_target(api_key_env="RECOMMENDER_TEST_KEY")._openai()
    assert endpoint.headers == {"Authorization": "Bearer sk-secret-1"}
    assert "sk-secret-1" not in repr(endpoint)
    assert endpoint.api_key_env == "RECOMMENDER_TEST_KEY"  # what the load gets: each of its processes reads the key
    assert openai_target()._openai().headers == {}  # no variable named: no header


def keyed_routes(seen: list[str | None]) -> dict:
    """A stand-in OpenAI endpoint (the `scripted` server) that records each request's Authorization header and
    refuses a wrong one (401), to show which header our HTTP client sends; the real server is Infinity in the
    integration tier."""

    def answer(body: dict):
        def route(headers):
            seen.append(headers.get("Authorization"))
            if headers.get("Authorization") != "Bearer sk-right":
                return 401, json.dumps({"error": "invalid api key"}).encode()
            return 200, json.dumps(body).encode()

        return route

    rows = {"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(2)]}
    return {"/v1/models": answer({"data": [{"id": "m"}]}), "/v1/embeddings": answer(rows)}


def test_readiness_and_probe_send_the_key_and_a_refusal_names_the_setting(scripted, monkeypatch, tmp_path):
    seen: list[str | None] = []
    url = scripted(keyed_routes(seen)) + "/v1"
    monkeypatch.setenv("RECOMMENDER_TEST_KEY", "sk-right")
    with openai_target(url=url, api_key_env="RECOMMENDER_TEST_KEY").deploy(None, "m", tmp_path) as endpoint:
        endpoint.probe({"model": "m", "input": ["a", "b"]})
    assert len(seen) >= 2 and set(seen) == {"Bearer sk-right"}  # the model list and the probe
    with pytest.raises(TargetError) as refused:
        openai_target(url=url)._openai().probe({"model": "m", "input": ["a", "b"]})
    assert "HTTP 401" in refused.value.message and "target.api_key_env" in refused.value.message
    assert seen[-1] is None  # no variable named: no header
