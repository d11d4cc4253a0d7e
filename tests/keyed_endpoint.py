"""A real OpenAI-compatible embeddings server on loopback that takes an API key, for the secrets tests: it answers
/v1/health to anyone and /v1/models and /v1/embeddings only to `Authorization: Bearer <key>` (401 otherwise),
and counts the requests it served and refused. Made for the tests (a keyed Infinity needs .venvs/infinity and
minutes; this needs nothing): its rows are 3 numbers, so the correctness gate is off where it is used."""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class KeyedHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the load's clients use it

    def do_GET(self) -> None:
        if self.path.endswith("/health"):
            self._answer(200, {"status": "ok"})
        elif self._authorized():
            self._answer(200, {"data": [{"id": self.server.model}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        if self._authorized():
            rows = body.get("input") or []
            data = [{"object": "embedding", "index": i, "embedding": [1.0, 0.0, 0.0]} for i in range(len(rows))]
            self._answer(200, {"object": "list", "data": data, "model": self.server.model})

    def _authorized(self) -> bool:
        good = self.headers.get("Authorization") == f"Bearer {self.server.key}"
        with self.server.lock:
            self.server.counts["served" if good else "refused"] += 1
        if not good:
            self._answer(401, {"error": "a valid API key is required"})
        return good

    def _answer(self, status: int, document: dict) -> None:
        content = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(content)))
        self.end_headers()
        self.wfile.write(content)

    def log_message(self, *args: object) -> None:
        pass


class KeyedServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: object, client_address: object) -> None:
        """A load client closing its connection at the end of a run is not an error worth a traceback."""


@contextlib.contextmanager
def keyed_endpoint(key: str, model: str = "m") -> Iterator[tuple[str, Counter]]:
    """(its base URL with /v1, the counts of requests `served` and `refused`), until the block ends."""
    server = KeyedServer(("127.0.0.1", 0), KeyedHandler)
    server.key, server.model, server.counts, server.lock = key, model, Counter(), threading.Lock()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server.counts
    finally:
        server.shutdown()
        server.server_close()
