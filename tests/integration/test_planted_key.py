"""A real `recommender run` with a planted API key leaves no trace of it: real Locust (a master, two local workers
and a worker joining as a remote host's does, `recommender worker`, with the key in its own environment) against a
real loopback OpenAI endpoint that takes the key (tests/keyed_endpoint.py). The key is in the run's environment
only, under a variable named unlike a secret (redaction does not hide it by name): after the run, the SQLite store,
the logs and every file under the run folders are searched for it, byte by byte, and so is what the commands
printed. A worker whose host lacks the variable gets no key from the master: it says so and leaves, and the run
ends with its reason."""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.errors import LoadError
from recommender.load.generators import MasterSettings, free_port
from recommender.load.runner import LoadRequest, run_load
from recommender.spec.traffic import Phase
from recommender.store.results import ResultStore
from tests.keyed_endpoint import keyed_endpoint
from tests.processes import stop_group

pytestmark = [pytest.mark.integration, pytest.mark.shares_host]

ROOT = Path(__file__).resolve().parents[2]
VARIABLE, KEY = "RECOMMENDER_PLANTED_ENDPOINT_AUTH", "pk-planted-9f3a7c1e5b"
SPEC = """name: planted-key
correctness: "off"
target: {{kind: remote, protocol: openai, url: "{url}", model: m, api_key_env: {variable}}}
traffic:
  warmup_seconds: 0
  window_seconds: 0.5
  workers: 2
  remote_workers: 1
  master_port: {port}
  worker_wait_seconds: 60
  phases: [{{initial_users: 2, duration_seconds: 3}}]
"""


def test_a_planted_key_reaches_the_endpoint_and_nothing_else(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200", VARIABLE: KEY}
    with keyed_endpoint(KEY) as (url, counts):
        (tmp_path / "planted.yaml").write_text(SPEC.format(url=url, variable=VARIABLE, port=port))
        # a worker joining as a remote host's does: its key from its own environment, none from the master
        with joined(port, env) as worker_said:
            run = subprocess.run(
                [*RECOMMENDER, "run", "planted.yaml"],
                env=env,
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
    said = run.stdout + run.stderr
    assert run.returncode == 0, said[-3000:]
    assert counts["served"] > 10 and counts["refused"] == 0, counts  # every request carried the key
    results = ResultStore.open(f"sqlite:///{tmp_path / '.recommender' / 'results.db'}").results("planted-key")
    assert [str(r.status) for r in results] == ["ok"], [r.reason for r in results]
    assert KEY not in said + worker_said.read()
    searched = [path for path in tmp_path.rglob("*") if path.is_file() and path.name != "planted.yaml"]
    assert any(path.name == "results.db" for path in searched)
    assert any(path.name.startswith("locust-worker") for path in searched)  # the distributed path's logs are there
    holding = [str(path.relative_to(tmp_path)) for path in searched if KEY.encode() in path.read_bytes()]
    assert holding == []


def test_a_worker_without_the_keys_variable_gets_no_key_and_says_so_in_one_line(tmp_path: Path) -> None:
    """Before, the master sent the headers (the key in them) to any process that connected."""
    port = free_port()
    keyless = {name: value for name, value in os.environ.items() if name != VARIABLE} | {"PYTHONPATH": str(ROOT)}
    os.environ[VARIABLE] = KEY  # the master's environment (run_load's children inherit it)
    try:
        with keyed_endpoint(KEY) as (url, counts), joined(port, keyless) as worker_said:
            request = LoadRequest(
                endpoint=url.removesuffix("/v1"),
                model_name="m",
                bodies=[{"model": "m", "input": ["a text"]}],
                phases=[Phase(initial_users=1, duration_seconds=2)],
                out_dir=tmp_path,
                master=MasterSettings(port=port, remote_workers=1, wait_s=10),
                path="/v1/embeddings",
                answer_key="data",
                api_key_env=VARIABLE,
            )
            with pytest.raises(LoadError) as ended:  # the run cannot be the one planned: it ends with the reason
                run_load(request)
    finally:
        os.environ.pop(VARIABLE)
    said = worker_said.read()
    assert f"names {VARIABLE}, which is not set in this load process's environment" in said, said
    assert "this worker leaves the run" in said and "error: worker: left the run of the master" in said  # exit 2
    assert ended.value.message.startswith("a load worker left the run: target.api_key_env names " + VARIABLE)
    assert "\n" not in ended.value.message and KEY not in said + ended.value.message
    assert counts["refused"] == 0, counts  # no request without the key reached the endpoint


RECOMMENDER = [sys.executable, "-m", "recommender"]


@contextlib.contextmanager
def joined(port: int, env: dict[str, str]) -> Iterator[io.StringIO]:
    """`recommender worker` joining the master at 127.0.0.1:port with `env`; what it printed, once stopped."""
    said = io.StringIO()
    worker = subprocess.Popen(
        [*RECOMMENDER, "worker", "--master", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        yield said
    finally:
        stop_group(worker)
        said.write(worker.stdout.read() if worker.stdout else "")
        said.seek(0)
