"""`recommender run` of a generative remote endpoint (the null endpoint's streaming mode, loopback): the job sends
generation bodies, stores runs whose records hold the generation columns, and records the gate as not checked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.load.null_endpoint import NullEndpoint
from recommender.load.null_stream import GenerationBehaviour
from recommender.load.result import LoadResult
from recommender.store.results import ResultStore
from recommender.targets.openai_endpoint import PROBE_TOKENS
from recommender.targets.remote import RemoteTarget
from recommender.targets.wire import OPENAI_CHAT, OPENAI_COMPLETIONS, generation_body, openai

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_a_run_of_a_chat_endpoint_stores_token_records(tmp_path: Path) -> None:
    with NullEndpoint(generation=GenerationBehaviour(first_token_ms=2, token_delay_ms=1)) as url:
        (tmp_path / "chat.yaml").write_text(
            "name: chat-micro\n"
            f"target: {{kind: remote, protocol: openai-chat, url: '{url}/v1', model: tiny, api_key_env: GEN_KEY}}\n"
            "traffic: {warmup_seconds: 0, phases: [{initial_users: 2, duration_seconds: 3}]}\n"
        )
        env = {
            **os.environ,
            "GEN_KEY": "sk-not-checked-by-the-stand-in",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        done = subprocess.run(
            [sys.executable, "-m", "recommender", "run", "chat.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("chat-micro")
    assert result.status == "ok", result.reason
    assert result.headline.requests > 0 and result.headline.failures == 0
    assert result.correctness is not None and not result.correctness["checked"]
    assert result.correctness["reason"].startswith("not checked: generation")
    (records,) = (tmp_path / ".recommender/runs/chat-micro").glob("**/load.npz")
    log = LoadResult.from_npz(records).requests
    assert log.generative and log.finished.all() and set(log.output_tokens.tolist()) == {16}
    assert not log.tokens_counted.any() and (log.ttft_us >= 2000).all()


def test_the_probe_of_a_generative_endpoint_is_one_short_unstreamed_completion(tmp_path: Path) -> None:
    body = generation_body(openai("/v1", OPENAI_CHAT), "tiny", "hello", 16)
    with NullEndpoint(generation=GenerationBehaviour()) as url:
        target = RemoteTarget(endpoint=f"{url}/v1", protocol=OPENAI_CHAT, model="tiny")
        endpoint = target.deploy(None, "ignored", tmp_path)  # readiness checked
        assert endpoint.wire.generative and endpoint.wire.path("tiny") == "/v1/chat/completions"
        answer = endpoint.probe(body)
    assert answer["choices"][0]["message"]["content"] == "tok " * PROBE_TOKENS  # short, and read as one JSON answer
    with NullEndpoint(generation=GenerationBehaviour(malformed="no-finish")) as url:
        endpoint = RemoteTarget(endpoint=f"{url}/v1", protocol=OPENAI_COMPLETIONS, model="tiny").deploy(
            None, "ignored", tmp_path
        )
        with pytest.raises(
            TargetError, match=r"a completions request for model 'tiny' .* no choice with a finish_reason"
        ):
            endpoint.probe(generation_body(endpoint.wire, "tiny", "hello", 16))
