"""The null KServe v2 endpoint, a real child process on loopback, spoken to with a plain HTTP/1.1 client."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import ExitStack
from urllib.parse import urlsplit

import pytest

from recommender.load.null_endpoint import NullEndpoint

pytestmark = pytest.mark.integration


@pytest.fixture
def connect() -> Iterator:
    """Start a null endpoint with the given behaviour; returns an HTTP/1.1 (keep-alive) connection to it."""
    with ExitStack() as stack:

        def start(**behaviour: float) -> http.client.HTTPConnection:
            url = urlsplit(stack.enter_context(NullEndpoint(**behaviour)))
            return http.client.HTTPConnection(url.hostname, url.port, timeout=5)

        yield start


def exchange(
    connection: http.client.HTTPConnection, method: str, path: str, body: bytes | None = None
) -> tuple[int, bytes]:
    connection.request(method, path, body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.read()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v2/health/ready", 200),
        ("GET", "/v2/health/live", 200),
        ("GET", "/v2/models/bert/infer", 404),
        ("POST", "/v1/x", 404),
    ],
)
def test_routes(connect, method: str, path: str, status: int) -> None:
    assert exchange(connect(), method, path)[0] == status


def test_infer_answers_kserve_v2_outputs_on_one_kept_alive_connection(connect) -> None:
    connection = connect()
    for _ in range(50):
        status, body = exchange(connection, "POST", "/v2/models/bert/infer", b'{"inputs": []}')
        assert status == 200
    answer = json.loads(body)
    assert answer["model_name"] == "bert" and answer["outputs"][0]["name"] == "output__0"


def test_error_share_answers_500(connect) -> None:
    connection = connect(error_share=0.5, seed=3)
    statuses = [exchange(connection, "POST", "/v2/models/m/infer", b"{}")[0] for _ in range(200)]
    assert set(statuses) == {200, 500}
    assert 60 < statuses.count(500) < 140


def generation(connection: http.client.HTTPConnection, path: str, body: dict) -> tuple[int, str, bytes]:
    connection.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    return response.status, response.getheader("Content-Type") or "", response.read()


def events_of(stream: bytes) -> list[bytes]:
    return [event.removeprefix(b"data: ") for event in stream.split(b"\n\n") if event]


def test_the_generative_mode_streams_as_vllm_does_on_one_kept_alive_connection(connect) -> None:
    connection = connect()
    chat = {"model": "m", "messages": [{"role": "user", "content": "a b c"}], "max_tokens": 3, "stream": True}
    for _ in range(3):
        status, kind, stream = generation(
            connection, "/v1/chat/completions", chat | {"stream_options": {"include_usage": True}}
        )
        assert (status, kind) == (200, "text/event-stream")
    *chunks, usage, done = events_of(stream)
    assert done == b"[DONE]" and json.loads(usage)["usage"] == {
        "prompt_tokens": 3,
        "completion_tokens": 3,
        "total_tokens": 6,
    }
    deltas = [json.loads(c)["choices"][0] for c in chunks]
    assert deltas[0]["delta"] == {"role": "assistant", "content": ""}  # the role chunk first, then one per token
    assert [d["finish_reason"] for d in deltas[1:]] == [None, None, "length"]
    # no usage asked for: none sent; completions: `text` chunks
    *chunks, done = events_of(
        generation(connection, "/completions", {"prompt": "x", "max_tokens": 2, "stream": True})[2]
    )
    assert [json.loads(c)["choices"][0]["text"] for c in chunks] == ["tok ", "tok "] and done == b"[DONE]"


def test_the_generative_mode_answers_unstreamed_and_health(connect) -> None:
    connection = connect()
    status, kind, body = generation(connection, "/v1/completions", {"prompt": "one two", "max_tokens": 4})
    answer = json.loads(body)
    assert (status, kind) == (200, "application/json") and answer["choices"][0]["text"] == "tok " * 4
    assert answer["usage"]["completion_tokens"] == 4 and answer["choices"][0]["finish_reason"] == "length"
    assert exchange(connection, "GET", "/v1/health")[0] == 200
