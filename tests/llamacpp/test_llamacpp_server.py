"""The real llama-server through the product's llamacpp target: the tiny Llama converted to GGUF (f32 and q8_0, each
once) with its WordPiece vocabulary, which the server tokenizes to the very ids of the folder's own tokenizer
(/tokenize, with and without [CLS] ... [SEP]); a streamed chat read by the load child's own stream reader
(load/token_stream.py) as the load reads it (a finish reason, `usage` and `[DONE]`, as many tokens as asked), and a
teardown that leaves no process."""

from __future__ import annotations

import http.client
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest
from transformers import AutoTokenizer

from recommender.load.token_stream import TokenStream
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.targets import llamacpp_venv
from recommender.targets.gguf import gguf_path
from recommender.targets.llamacpp import LlamaCppTarget
from recommender.targets.wire import CONTENT_KEYS, OPENAI_CHAT, generation_body
from tests.llamacpp.conftest import READY_S

pytestmark = pytest.mark.llamacpp
MAX_TOKENS = 12
# texts the folder's tokenizer splits in several ways: words, pieces (##), punctuation, capitals, accents, digits
TEXTS = (
    "the quick brown fox jumps over",
    "Hello, World! Don't tokenize THIS differently.",
    "naïve café résumé: unbelievably 12345 tokens",
    "user: how many tokens?\nassistant:",
)


def server_tokens(host: str, text: str, add_special: bool) -> list[int]:
    """llama-server's own tokenization of `text` (its /tokenize, beside the OpenAI routes)."""
    url = urlsplit(host)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        body = {"content": text, "add_special": add_special}
        connection.request("POST", "/tokenize", json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.read()[:300]
        return json.loads(response.read())["tokens"]
    finally:
        connection.close()


def streamed(host: str, path: str, body: dict) -> TokenStream:
    """POST `body` and feed its server-sent events, one by one, to the load child's reader."""
    url = urlsplit(host)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=120)
    reader = TokenStream(CONTENT_KEYS[OPENAI_CHAT], time.monotonic_ns())
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200, response.read()[:300]
        event = b""
        for line in response:
            event += line
            if line in (b"\n", b"\r\n"):  # an event ends with a blank line
                reader.feed(event, time.monotonic_ns())
                event = b""
        if event.strip():
            reader.feed(event, time.monotonic_ns())
    finally:
        connection.close()
    return reader


def alive(pids: list[int]) -> list[int]:
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


@pytest.mark.parametrize("gguf_type", ["f32", "q8_0"])
def test_a_streamed_chat_is_read_as_the_load_reads_it(
    llamacpp_venv_in_use: Path, model_folder: Path, tmp_path: Path, gguf_type: str
) -> None:
    settings = LlamaCppSettings(gguf_type, parallel=2, batch=512, ubatch=256, threads=1)
    target = LlamaCppTarget(settings=settings, ready_timeout=READY_S)
    with target.deploy(model_folder, "model", tmp_path / "run") as deployment:
        pids = deployment.server_pids()
        tokenizer = AutoTokenizer.from_pretrained(str(model_folder))
        for text in TEXTS:  # the GGUF's vocabulary is the folder's: the same ids, special tokens added or not
            assert server_tokens(deployment.host, text, True) == tokenizer(text)["input_ids"], text
            plain = tokenizer(text, add_special_tokens=False)["input_ids"]
            assert server_tokens(deployment.host, text, False) == plain, text
        body = generation_body(deployment.wire, "model", "the quick brown fox jumps over", MAX_TOKENS)
        reader = streamed(deployment.host, deployment.wire.path("model"), body)
        ok, reason, generation = reader.outcome()
        assert ok, reason
        assert reader.finish_reason == "length" and reader.done
        assert reader.usage is not None and reader.usage["completion_tokens"] == MAX_TOKENS
        assert generation.output_tokens == MAX_TOKENS and generation.input_tokens > 0
        assert 1 < len(reader.chunk_us) <= MAX_TOKENS and reader.chunk_us == sorted(reader.chunk_us)
        probed = deployment.probe(body)  # the job's probe: the same body, unstreamed
        assert probed["choices"][0]["finish_reason"] in ("length", "stop")
        assert (tmp_path / "run" / "server.log").stat().st_size > 0
    assert pids and alive(pids) == []
    converted = gguf_path(model_folder, gguf_type, llamacpp_venv.REQUIREMENT)
    assert converted.exists() and converted.read_bytes()[:4] == b"GGUF"
