"""A real Locust run counts a request good only when its answer holds the rows the request asked for: against a real
HTTP server on loopback answering a fixed body, each client (geventhttpclient, FastHttpUser) on each wire; a malformed
answer's one-line reason is in the generator's log."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recommender.load.runner import HTTP_CLIENTS, LoadRequest, run_load
from recommender.spec import Phase
from recommender.targets.wire import KSERVE, openai, openai_body

pytestmark = [pytest.mark.integration, pytest.mark.shares_host]
TEXTS = ["a", "b"]  # every request asks for two rows
KSERVE_BODY = {"inputs": [{"name": "input_ids", "shape": [2, 3], "datatype": "INT64", "data": [1, 2, 3, 4, 5, 6]}]}
ONE_ROW = {"outputs": [{"name": "embedding", "shape": [1, 2], "datatype": "FP32", "data": [0.6, 0.8]}]}
TWO_ROWS = {"outputs": [{"name": "embedding", "shape": [2, 2], "datatype": "FP32", "data": [0.6, 0.8, 1, 0]}]}
EMBEDDINGS = {"data": [{"index": 1, "embedding": [0.6, 0.8]}, {"index": 0, "embedding": [1.0, 0.0]}]}


class Fixed(BaseHTTPRequestHandler):
    """Answers every POST with the server's `answer` (HTTP 200)."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body = self.server.answer  # type: ignore[attr-defined]
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Fixed)  # port 0: the kernel picks a free one
    server.answer = b""  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


CASES = [  # (wire, answer, good): the load's verdict on each answer
    ("openai", {"data": []}, False),
    ("openai", {"data": EMBEDDINGS["data"][:1]}, False),
    ("openai", EMBEDDINGS, True),
    ("kserve", {"outputs": []}, False),
    ("kserve", ONE_ROW, False),
    ("kserve", TWO_ROWS, True),
]


@pytest.mark.parametrize("client", list(HTTP_CLIENTS))
@pytest.mark.parametrize(("wire_name", "answer", "good"), CASES)
def test_a_request_is_good_only_with_the_rows_it_asked_for(
    answering: ThreadingHTTPServer, tmp_path: Path, client: str, wire_name: str, answer: dict, good: bool
) -> None:
    answering.answer = json.dumps(answer).encode()  # type: ignore[attr-defined]
    wire = openai() if wire_name == "openai" else KSERVE
    body = openai_body("m", TEXTS) if wire.takes_text else KSERVE_BODY
    request = LoadRequest(
        endpoint=f"http://127.0.0.1:{answering.server_address[1]}",
        model_name="m",
        bodies=[body],
        phases=[Phase(initial_users=1, duration_seconds=1)],
        out_dir=tmp_path,
        client=client,
        path=wire.path("m"),
        answer_key=wire.answer_key,
    )
    result = run_load(request)
    assert len(result.requests) > 0
    assert result.requests.failures == (0 if good else len(result.requests))
    log = (tmp_path / "locust.stderr.log").read_text()
    assert ("a failed answer:" in log) is not good
