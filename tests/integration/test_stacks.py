"""Serving stacks side by side, end to end: `recommender run` deploys a real Infinity server (infinity-emb in its own
virtualenv, .venvs/infinity from scripts/tool_venvs.sh) for each of its candidates, measures an existing OpenAI
endpoint (a second real Infinity server, started here through the same target, that takes an API key: one target
names the variable holding it, one does not), and meets OpenAI endpoints that misbehave: one that does not answer,
one that answers text, one whose rows have the wrong width. Those last two are
small HTTP servers written for this test (a broken stack cannot be had otherwise), named so below."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from recommender.load.generators import free_port
from recommender.store.results import ResultStore
from recommender.targets import infinity_venv
from tests.infinity_server import infinity_server, infinity_venv_in_use

pytestmark = [pytest.mark.integration, pytest.mark.stacks, pytest.mark.shares_host]

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV, KEY = "RECOMMENDER_TEST_INFINITY_KEY", "sk-stacks-test-4f2a"  # the existing endpoint's key, in the run's env


@pytest.fixture(scope="module")
def venv() -> Iterator[Path]:
    with infinity_venv_in_use() as folder:
        yield folder


@pytest.fixture(scope="module")
def existing(venv: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """An OpenAI endpoint that already runs and takes an API key: Infinity started through the infinity target with
    its own `--api-key`, stopped after."""
    with infinity_server(tmp_path_factory.mktemp("existing"), api_key=KEY) as url:
        yield url


class BrokenStack(BaseHTTPRequestHandler):
    """A made-up OpenAI endpoint that answers readiness and lists the model, then answers embeddings wrongly:
    `text` with a text page, `narrow` with 3-dimensional rows (MiniLM's are 384)."""

    mode = "text"

    def do_GET(self) -> None:
        self._answer(200, {"data": [{"id": "minilm"}]} if self.path.endswith("/models") else {"status": "ok"})

    def do_POST(self) -> None:
        rows = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
        if self.mode == "text":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.end_headers()
            self.wfile.write(b"embeddings are on vacation")
            return
        self._answer(200, {"data": [{"index": i, "embedding": [0.6, 0.8, 0.0]} for i in range(len(rows))]})

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def broken() -> Iterator[dict[str, str]]:
    servers = {}
    for mode in ("text", "narrow"):
        handler = type(f"BrokenStack_{mode}", (BrokenStack,), {"mode": mode})
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers[mode] = server
    yield {mode: f"http://127.0.0.1:{server.server_address[1]}" for mode, server in servers.items()}
    for server in servers.values():
        server.shutdown()


SPEC = """name: stacks-test
model: {{source: minilm}}
payload: {{sequence_length: 32}}
targets:
  - {{name: infinity, kind: infinity, engines: [torch, optimum], batch_sizes: [8]}}
  - {{name: existing, kind: remote, protocol: openai, url: "{existing}", model: minilm, api_key_env: {key_env}}}
  - {{name: nokey, kind: remote, protocol: openai, url: "{existing}", model: minilm}}
  - {{name: down, kind: remote, protocol: openai, url: "http://127.0.0.1:{closed}", model: minilm}}
  - {{name: text, kind: remote, protocol: openai, url: "{text}", model: minilm}}
  - {{name: narrow, kind: remote, protocol: openai, url: "{narrow}", model: minilm}}
traffic:
  warmup_seconds: 1
  window_seconds: 1
  concurrency: {{users: [2], duration_seconds: 5}}
  until_known: false
latency_threshold: {{percentile: p95, ms: 2000}}
"""


def test_infinity_and_openai_endpoints_rank_with_triton_rules_and_broken_ones_fail_alone(
    venv: Path, existing: str, broken: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "stacks.yaml").write_text(SPEC.format(existing=existing, closed=free_port(), key_env=KEY_ENV, **broken))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", infinity_venv.ENVIRONMENT: str(venv), KEY_ENV: KEY}
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "run", "stacks.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    print(done.stdout[-4000:], done.stderr[-3000:])
    assert done.returncode == 0, done.stderr[-2000:]
    results = {
        r.name: r for r in ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("stacks-test")
    }
    assert {name: str(r.status) for name, r in results.items()} == {
        "torch-mbs8@infinity": "ok",
        "optimum-mbs8@infinity": "ok",
        "openai-endpoint@existing": "ok",
        "openai-endpoint@nokey": "failed",
        "openai-endpoint@down": "failed",
        "openai-endpoint@text": "failed",
        "openai-endpoint@narrow": "incorrect",
    }
    for name in ("torch-mbs8@infinity", "optimum-mbs8@infinity", "openai-endpoint@existing"):
        result = results[name]
        assert result.headline is not None and result.headline.max_invocations > 0, name
        assert result.correctness["checked"] and result.correctness["passed"], (name, result.correctness)
        assert min(f["min_cosine"] for f in result.correctness["figures"]) > 0.999, name
    assert "does not answer" in results["openai-endpoint@down"].reason
    refused = results["openai-endpoint@nokey"].reason or ""
    assert "HTTP 401" in refused and "target.api_key_env" in refused
    # the key was sent (the Locust child's requests were answered) and is nowhere in the store or the run's files
    assert KEY not in (tmp_path / ".recommender" / "results.db").read_bytes().decode(errors="replace")
    assert not [f for f in tmp_path.rglob("*") if f.is_file() and KEY.encode() in f.read_bytes()]
    assert "did not answer JSON" in results["openai-endpoint@text"].reason
    assert "3-dimensional rows" in results["openai-endpoint@narrow"].reason
    for name in results:  # one line each, whatever went wrong
        assert "\n" not in (results[name].reason or "")
    assert "#1 " in done.stdout and "@infinity" in done.stdout and "@existing" in done.stdout
    servers = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.split()
    assert servers == [], "an Infinity server outlived its candidate"
