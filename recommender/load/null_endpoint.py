"""A minimal, fast KServe-v2-shaped HTTP server: the stand-in endpoint for load tests and generator benchmarks.

It answers `POST /v2/models/<model>/infer` with a fixed JSON body holding `outputs`, one row for each row the request
asks for (the shape a good answer has: targets/wire.py `answer_problem`), and
`GET /v2/health/ready` / `live` with 200. Options: a fixed delay per inference (ms) and a
share of inferences answered with HTTP 500, to test failure accounting. asyncio, HTTP/1.1
keep-alive, one event loop: cheap enough not to be the bottleneck of a 2-core host.
It is an OpenAI generation stand-in too (null_stream.py): `POST <prefix>/chat/completions` and `<prefix>/completions`
stream tokens at set delays (`GET <prefix>/health` answers 200).

    python -m recommender.load.null_endpoint --port 0 --delay-ms 2   # prints the bound port first
    python -m recommender.load.null_endpoint --first-token-ms 20 --token-delay-ms 5 --tokens 16 --no-usage

`NullEndpoint` runs it as a child process (a context manager yielding the base URL).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
from dataclasses import dataclass, field

from recommender.load.null_stream import MALFORMED, GenerationBehaviour, answer_generation, generation_route
from recommender.targets import kserve
from recommender.targets.wire import rows_asked

_MAX_HEADER_BYTES = 64 * 1024
_BODIES_KEPT = 1024  # request bodies whose rows are remembered (the load cycles through a few; more are parsed)
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 411: "Length Required", 500: "Internal Server Error"}


@dataclass
class EndpointBehaviour:
    """How the null endpoint answers an inference."""

    delay_ms: float = 0.0
    error_share: float = 0.0
    seed: int | None = None
    generation: GenerationBehaviour = field(default_factory=GenerationBehaviour)  # chat / completions answers
    rng: random.Random = field(init=False, repr=False)
    bodies: dict[tuple[str, int], bytes] = field(default_factory=dict, init=False, repr=False)
    rows: dict[bytes, int] = field(default_factory=dict, init=False, repr=False)  # request body -> rows it asks for

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def infer_body(self, model: str, request: bytes = b"") -> bytes:
        """The fixed KServe v2 response for `model` and the rows `request` asks for (built once per model and
        rows; a request body's rows are read once: the load cycles through a few bodies)."""
        rows = self.rows.get(request)
        if rows is None:
            try:
                rows = rows_asked(json.loads(request)) if request else 1
            except ValueError:
                rows = 1
            if len(self.rows) < _BODIES_KEPT:
                self.rows[request] = rows
        if (model, rows) not in self.bodies:
            output = {"name": "output__0", "datatype": "FP32", "shape": [rows, 2], "data": [0.25, 0.75] * rows}
            answer = {"model_name": model, "model_version": "1", "outputs": [output]}
            self.bodies[model, rows] = json.dumps(answer).encode()
        return self.bodies[model, rows]


def _response(status: int, body: bytes = b"", keep_alive: bool = True) -> bytes:
    head = (
        f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        f"Connection: {'keep-alive' if keep_alive else 'close'}\r\n\r\n"
    )
    return head.encode("latin-1") + body


async def _answer(method: str, path: str, behaviour: EndpointBehaviour, request: bytes = b"") -> tuple[int, bytes]:
    if method == "GET" and (path in (kserve.HEALTH_READY, kserve.HEALTH_LIVE) or path.endswith("/health")):
        return 200, b""
    model, action = kserve.model_route(path) or ("", "")
    if method == "POST" and generation_route(path):  # the share of generations answered with HTTP 500
        return 500, b'{"error": "injected failure"}'
    if method == "POST" and model and action == "infer":
        if behaviour.delay_ms > 0:
            await asyncio.sleep(behaviour.delay_ms / 1000.0)
        if behaviour.error_share > 0 and behaviour.rng.random() < behaviour.error_share:
            return 500, b'{"error": "injected failure"}'
        return 200, behaviour.infer_body(model, request)
    return 404, b'{"error": "not found"}'


def _parse_head(head: bytes) -> tuple[str, str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    method, target, _version = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return method, target.split("?", 1)[0], headers


async def _serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, behaviour: EndpointBehaviour
) -> None:
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            method, path, headers = _parse_head(head[:-4])
            if "chunked" in headers.get("transfer-encoding", ""):
                writer.write(_response(411, keep_alive=False))
                break
            request = await reader.readexactly(int(headers.get("content-length", "0")))
            keep_alive = headers.get("connection", "").lower() != "close"
            route = generation_route(path) if method == "POST" else None
            if route and not (behaviour.error_share > 0 and behaviour.rng.random() < behaviour.error_share):
                await answer_generation(writer, route, request, behaviour.generation)
                continue
            status, body = await _answer(method, path, behaviour, request)
            writer.write(_response(status, body, keep_alive))
            await writer.drain()
            if not keep_alive:
                break
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError, ValueError):
        pass  # client went away or sent garbage: drop the connection
    except asyncio.CancelledError:
        pass  # shutting down; returning (not re-raising) keeps asyncio's stream callback quiet
    finally:
        writer.close()


async def serve(port: int, behaviour: EndpointBehaviour, host: str = "127.0.0.1") -> None:
    """Serve until SIGTERM/SIGINT; print the bound port as the first stdout line."""
    server = await asyncio.start_server(
        lambda r, w: _serve_connection(r, w, behaviour), host, port, limit=_MAX_HEADER_BYTES, backlog=1024
    )
    stop = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(signum, stop.set)
    print(server.sockets[0].getsockname()[1], flush=True)
    async with server:
        await stop.wait()


class NullEndpoint:
    """Runs the null endpoint in a child process; `with NullEndpoint(delay_ms=5) as url: ...`."""

    def __init__(
        self,
        delay_ms: float = 0.0,
        error_share: float = 0.0,
        seed: int | None = None,
        generation: GenerationBehaviour | None = None,
    ) -> None:
        self.args = ["--delay-ms", str(delay_ms), "--error-share", str(error_share)]
        if seed is not None:
            self.args += ["--seed", str(seed)]
        if generation is not None:
            self.args += _generation_args(generation)
        self.process: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        cmd = [sys.executable, "-m", "recommender.load.null_endpoint", "--port", "0", *self.args]
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [_package_root(), os.environ.get("PYTHONPATH")])),
        }
        self.process = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        port = self.process.stdout.readline().strip() if self.process.stdout else ""
        if not port.isdigit():
            self.__exit__()
            raise RuntimeError(f"null endpoint did not report its port (got {port!r})")
        return f"http://127.0.0.1:{port}"

    def __exit__(self, *exc: object) -> None:
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout:
            self.process.stdout.close()
        self.process = None


def _generation_args(generation: GenerationBehaviour) -> list[str]:
    args = ["--first-token-ms", str(generation.first_token_ms), "--token-delay-ms", str(generation.token_delay_ms)]
    args += ["--tokens", str(generation.tokens)] if generation.tokens else []
    args += [] if generation.usage else ["--no-usage"]
    return args + (["--malformed", generation.malformed] if generation.malformed else [])


def _package_root() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="TCP port on 127.0.0.1; 0 picks a free one.")
    parser.add_argument("--delay-ms", type=float, default=0.0, help="Fixed delay added to every inference.")
    parser.add_argument("--error-share", type=float, default=0.0, help="Share of inferences answered with HTTP 500.")
    parser.add_argument("--seed", type=int, default=None, help="Seed for the error draw.")
    parser.add_argument("--tokens", type=int, default=None, help="Generation: tokens per answer (default max_tokens).")
    parser.add_argument("--first-token-ms", type=float, default=0.0, help="Generation: delay to the first token.")
    parser.add_argument("--token-delay-ms", type=float, default=0.0, help="Generation: delay between tokens.")
    parser.add_argument("--no-usage", action="store_true", help="Generation: never send the usage chunk.")
    parser.add_argument("--malformed", choices=MALFORMED, default="", help="Generation: break every stream so.")
    args = parser.parse_args(argv)
    generation = GenerationBehaviour(
        args.tokens, args.first_token_ms, args.token_delay_ms, not args.no_usage, args.malformed
    )
    behaviour = EndpointBehaviour(args.delay_ms, args.error_share, args.seed, generation)
    asyncio.run(serve(args.port, behaviour))


if __name__ == "__main__":
    main()
