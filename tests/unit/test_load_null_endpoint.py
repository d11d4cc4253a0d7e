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
