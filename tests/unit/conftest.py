"""Real HTTP servers on loopback for the unit tier: the null KServe endpoint (a child process) and a scripted one."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from recommender.load.null_endpoint import NullEndpoint

Answer = tuple[int, bytes] | tuple[int, bytes, Mapping[str, str]]  # status, body and any headers (a redirect's)
Route = Answer | Callable[[Mapping[str, str]], Answer]  # a fixed answer, or one chosen from the request's headers


class Scripted(BaseHTTPRequestHandler):
    """Answers each path (GET or POST) from its server's `routes`; 404 with Triton's error JSON elsewhere."""

    def do_GET(self) -> None:
        self._answer()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self._answer()

    def _answer(self) -> None:
        route = self.server.routes.get(self.path, (404, b'{"error": "not found"}'))
        status, body, *extra = route(self.headers) if callable(route) else route
        self.send_response(status)
        for name, value in (extra[0] if extra else {}).items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def scripted() -> Iterator[Callable[[dict[str, Route]], str]]:
    """Start a scripted HTTP server in a thread: `scripted({path: route})` returns its base URL."""
    servers: list[ThreadingHTTPServer] = []

    def start(routes: dict[str, Route]) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Scripted)
        server.routes = routes
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def null_endpoint() -> Iterator[str]:
    """The null KServe v2 endpoint's base URL (ready, answers every model's infer, 404 elsewhere)."""
    with NullEndpoint() as url:
        yield url
