"""The real vLLM server through the product's vllm target: it serves the built Llama to a streamed chat, its own
counters (/metrics: prompt and generation tokens) equal the records' token sums, it leaves no process behind when
torn down, and what a `kill -9` of its job left is removed by the next deploy in the run directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from recommender.metrics.prometheus import parse_counters
from recommender.targets.vllm import COMPLETIONS, VllmDeployment, VllmTarget
from tests.processes import stop_group
from tests.vllm.conftest import ENGINE_ARGS, READY_S, ROOT
from tests.vllm.streaming import request_log, run_batch, stream

pytestmark = pytest.mark.vllm
COUNTERS = ("vllm:prompt_tokens_total", "vllm:generation_tokens_total")
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "the", "lazy", "dog", "while", "serving", "models")


def chat_body(model: str, words: int, max_tokens: int) -> dict:
    """A streamed chat request of `words` words asking for exactly `max_tokens` tokens (ignore_eos)."""
    content = " ".join(WORDS[i % len(WORDS)] for i in range(words))
    return {
        "model": model,
        "messages": [{"role": "user", "content": content}],
        "max_tokens": max_tokens,
        "ignore_eos": True,
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def counters(deployment: VllmDeployment) -> dict[str, float]:
    assert deployment.metrics_url is not None
    with urllib.request.urlopen(deployment.metrics_url, timeout=10) as answer:
        return parse_counters(answer.read().decode(), COUNTERS)


def alive(pids: list[int]) -> list[int]:
    """The pids still running (a zombie holds nothing: gone)."""
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def test_a_streamed_chat_is_answered_token_by_token(chat_server: VllmDeployment) -> None:
    answer = stream(chat_server.host, chat_server.generation_path, chat_body(chat_server.model_name, 5, 12))
    assert answer.status == 200 and answer.finish_reason == "length" and answer.done
    assert answer.usage["completion_tokens"] == 12 and answer.usage["prompt_tokens"] > 5
    assert 1 < len(answer.chunk_us) <= 12 and answer.text.strip()
    assert answer.chunk_us == sorted(answer.chunk_us) and answer.chunk_us[-1] <= answer.end_us
    probed = chat_server.probe(chat_body(chat_server.model_name, 5, 3))  # the job's probe: the same body, unstreamed
    assert probed["usage"]["completion_tokens"] == 3 and probed["choices"][0]["message"]["content"]


def test_the_servers_token_counters_equal_the_records_token_sums(chat_server: VllmDeployment) -> None:
    bodies = [chat_body(chat_server.model_name, 3 + i % 7, 4 + (i * 5) % 17) for i in range(16)]
    before = counters(chat_server)
    log = request_log(run_batch(chat_server.host, chat_server.generation_path, bodies, concurrency=4))
    assert log.generative and bool(log.ok.all()) and bool(log.finished.all())
    assert log.output_tokens.tolist() == [body["max_tokens"] for body in bodies]  # ignore_eos: as many as asked
    expected = {COUNTERS[0]: int(log.input_tokens.sum()), COUNTERS[1]: int(log.output_tokens.sum())}
    deadline = time.monotonic() + 10  # the counters are updated as each request's last step is recorded
    while True:
        after = counters(chat_server)
        delta = {name: int(after[name] - before[name]) for name in COUNTERS}
        if delta == expected or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert delta == expected


JOB = """
import sys, time
from pathlib import Path
from recommender.targets.vllm import VllmTarget
deployment = VllmTarget(engine_args={"max_num_seqs": 4}, ready_timeout=float(sys.argv[3])).deploy(
    Path(sys.argv[1]), "model", Path(sys.argv[2]))
print(" ".join(map(str, deployment.server_pids())), flush=True)
time.sleep(600)
"""


def test_a_killed_jobs_server_is_removed_by_the_next_deploy_which_leaves_nothing(
    vllm_venv_in_use: Path, model_folder: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "run"
    job = subprocess.Popen(
        [sys.executable, "-c", JOB, str(model_folder), str(run_dir), str(READY_S)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
        env=os.environ | {"PYTHONPATH": str(ROOT)},
    )
    try:
        assert job.stdout is not None
        first = [int(pid) for pid in job.stdout.readline().split()]
        assert first, "the job printed no server pids"
        os.kill(job.pid, signal.SIGKILL)
        job.wait()
    finally:
        if job.poll() is None:  # it failed before its kill: its group goes, the server with it
            stop_group(job)
    time.sleep(1.0)
    left = alive(first[1:])  # the API server dies with its job (lifeline); its engine's processes outlive it
    target = VllmTarget(protocol=COMPLETIONS, engine_args=ENGINE_ARGS, ready_timeout=READY_S)
    with target.deploy(model_folder, "model", run_dir) as deployment:
        assert alive(first) == []
        second = deployment.server_pids()
        body = {"model": "model", "prompt": "the quick brown fox", "max_tokens": 6, "ignore_eos": True}
        answer = stream(deployment.host, deployment.generation_path, body | {"stream": True})
        assert answer.status == 200 and answer.done and answer.chunk_us
    assert left, "nothing outlived the killed job: this test would not see a leftover"
    assert len(second) >= 2 and alive(second) == []


def test_the_products_load_child_counts_what_the_server_counts(chat_server: VllmDeployment, tmp_path: Path) -> None:
    """The Locust child (the run's load path, not this tier's client) streams chat at concurrency 4 for 6 s: vLLM's
    own counters grew by the records' token sums, within what the requests cut at the level's end carried (the
    server counts a cut request's prompt and the tokens it generated before the cut; the records keep no row)."""
    from recommender.load.runner import LoadRequest, run_load
    from recommender.spec import Phase
    from recommender.targets.wire import generation_body

    wire, max_tokens, users = chat_server.wire, 12, 4
    texts = [" ".join(WORDS[: 3 + i % 7]) for i in range(8)]
    bodies = [generation_body(wire, chat_server.model_name, text, max_tokens, wire.stream) for text in texts]
    before = counters(chat_server)
    result = run_load(
        LoadRequest(
            chat_server.host,
            chat_server.model_name,
            bodies,
            [Phase(initial_users=users, spawn_rate=0, duration_seconds=6)],
            tmp_path,
            path=wire.path(chat_server.model_name),
            answer_key=wire.answer_key,
            wire=wire.name,
            stream=wire.stream,
        )
    )
    log = result.requests
    assert log.generative and len(log) >= 8 and log.failures == 0 and bool(log.finished.all())
    assert set(log.output_tokens.tolist()) == {max_tokens} and not log.tokens_counted.any()
    assert bool((log.ttft_us > 0).all()) and bool((log.ttft_us <= log.latency_us).all())
    time.sleep(1.0)  # a request cut at the end finishes on the server; its counts are recorded with its last step
    after = counters(chat_server)
    prompt = int(after[COUNTERS[0]] - before[COUNTERS[0]]) - int(log.input_tokens.sum())
    generated = int(after[COUNTERS[1]] - before[COUNTERS[1]]) - int(log.output_tokens.sum())
    longest_prompt = int(log.input_tokens.max())
    # at most `users` requests were in flight at the cut: the server counted them, the records did not
    assert 0 <= prompt <= users * longest_prompt, (prompt, longest_prompt)
    assert 0 <= generated <= users * max_tokens, generated
