"""An OpenAI endpoint's API key: named by `target.api_key_env`, read from the environment at preflight, sent as a
bearer token by the run's own HTTP client (readiness, model list, the correctness gate's probe), never shown. The
Locust child's requests, against a real Infinity server that requires the key: tests/integration/test_stacks.py."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

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
    assert openai_target()._openai().headers == {}  # no variable named: no header


class KeyedServer(BaseHTTPRequestHandler):
    """A stand-in OpenAI endpoint that records the Authorization header of each request and refuses a wrong one
    (401), to show which header our HTTP client sends; the real server is Infinity in the integration tier."""

    seen: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        self._answer({"data": [{"id": "m"}]})

    def do_POST(self) -> None:
        rows = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        self._answer({"data": [{"index": i, "embedding": [1.0, 0.0]} for i in range(len(rows))]})

    def _answer(self, body: dict) -> None:
        self.seen.append(self.headers.get("Authorization"))
        status = 200 if self.headers.get("Authorization") == "Bearer sk-right" else 401
        data = json.dumps(body if status == 200 else {"error": "invalid api key"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def keyed():
    server = ThreadingHTTPServer(("127.0.0.1", 0), KeyedServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    KeyedServer.seen = []
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_readiness_and_probe_send_the_key_and_a_refusal_names_the_setting(keyed, monkeypatch, tmp_path):
    monkeypatch.setenv("RECOMMENDER_TEST_KEY", "sk-right")
    target = openai_target(url=keyed, api_key_env="RECOMMENDER_TEST_KEY")
    with target.deploy(None, "m", tmp_path) as endpoint:
        endpoint.probe({"model": "m", "input": ["a", "b"]})
    assert KeyedServer.seen and set(KeyedServer.seen) == {"Bearer sk-right"}
    with pytest.raises(TargetError) as refused:
        openai_target(url=keyed)._openai().probe({"model": "m", "input": ["a"]})
    assert "HTTP 401" in refused.value.message and "target.api_key_env" in refused.value.message
