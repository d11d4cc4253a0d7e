"""Integration tier: the real Locust child reading streamed generations from the null endpoint's generative mode
(loopback only): its TTFT and inter-token figures follow the stand-in's delays, its token counts equal its own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.load.null_endpoint import NullEndpoint
from recommender.load.null_stream import GenerationBehaviour
from recommender.load.runner import LoadRequest, LoadResult, run_load
from recommender.load.shapes import TrafficPlan, compile_traffic
from recommender.spec import Phase, TrafficSpec
from recommender.targets.wire import OPENAI_CHAT, OPENAI_COMPLETIONS, generation_body, openai

pytestmark = pytest.mark.integration

FIRST_MS, EVERY_MS, TOKENS = 20.0, 5.0, 8
# the slack a shared 2-core host adds to an asyncio sleep and a gevent wake-up, per figure (ms); never below it
SLACK_MS = 6.0


def run(
    tmp_path: Path,
    wire_name: str,
    behaviour: GenerationBehaviour,
    stream: bool = True,
    seconds: int = 3,
    workers: int = 1,
    plan: TrafficPlan | None = None,
) -> LoadResult:
    wire = openai("/v1", wire_name, stream)
    bodies = [generation_body(wire, "tiny", text, TOKENS, stream) for text in ("one two three", "four five")]
    with NullEndpoint(generation=behaviour) as url:
        request = LoadRequest(
            url,
            "tiny",
            bodies,
            plan or [Phase(initial_users=2, spawn_rate=0, duration_seconds=seconds)],
            tmp_path,
            path=wire.path("tiny"),
            answer_key=wire.answer_key,
            wire=wire.name,
            stream=stream,
            workers=workers,
        )
        return run_load(request)


def itl_ms(result: LoadResult) -> np.ndarray:
    """Each request's inter-token latency as AIPerf defines it: (end-to-end - TTFT) / (output tokens - 1)."""
    log = result.requests
    return (log.latency_us - log.ttft_us) / (log.output_tokens - 1) / 1000


def test_a_streamed_chat_is_timed_per_token_with_the_servers_counts(tmp_path: Path) -> None:
    result = run(tmp_path, OPENAI_CHAT, GenerationBehaviour(first_token_ms=FIRST_MS, token_delay_ms=EVERY_MS))
    log = result.requests
    assert log.generative and len(log) > 20 and log.failures == 0
    assert set(log.output_tokens.tolist()) == {TOKENS} and not log.tokens_counted.any() and log.finished.all()
    assert set(log.input_tokens.tolist()) == {3, 2}  # the stand-in's prompt words
    assert FIRST_MS <= np.median(log.ttft_us) / 1000 < FIRST_MS + SLACK_MS
    assert EVERY_MS <= np.median(itl_ms(result)) < EVERY_MS + SLACK_MS
    for row in range(len(log)):
        chunks = log.chunk_times_us(row)
        assert len(chunks) == TOKENS and chunks[0] == log.ttft_us[row] and chunks[-1] <= log.latency_us[row]
    # the stand-in sleeps before each token, so token j leaves it no sooner than FIRST + j x EVERY after the send;
    # the gap between two arrivals can be shorter (a late chunk shortens the next gap), the arrival itself cannot
    earliest_us = (FIRST_MS + EVERY_MS * np.arange(TOKENS)) * 1000
    assert all(np.all(log.chunk_times_us(row) >= earliest_us) for row in range(len(log)))
    expected = (FIRST_MS + EVERY_MS * (TOKENS - 1)) / 1000
    assert abs(np.median(log.latency_us) / 1e6 - expected) < SLACK_MS / 1000 * 2


def test_without_usage_the_content_chunks_are_counted(tmp_path: Path) -> None:
    result = run(tmp_path, OPENAI_COMPLETIONS, GenerationBehaviour(token_delay_ms=1.0, usage=False), seconds=2)
    log = result.requests
    assert log.failures == 0 and set(log.output_tokens.tolist()) == {TOKENS} and log.tokens_counted.all()
    assert set(log.input_tokens.tolist()) == {-1}


def test_a_non_streamed_answer_is_one_chunk_at_its_end(tmp_path: Path) -> None:
    result = run(tmp_path, OPENAI_CHAT, GenerationBehaviour(first_token_ms=5.0), stream=False, seconds=2)
    log = result.requests
    assert log.failures == 0 and set(log.output_tokens.tolist()) == {TOKENS}
    assert np.array_equal(log.ttft_us, log.latency_us)  # one answer: its first token is its end
    assert all(log.chunk_times_us(row).tolist() == [log.ttft_us[row]] for row in range(len(log)))


@pytest.mark.parametrize("malformed", ["no-done", "bad-json"])
def test_a_stream_that_does_not_end_cleanly_fails_every_request_and_says_why(tmp_path: Path, malformed: str) -> None:
    result = run(tmp_path, OPENAI_CHAT, GenerationBehaviour(malformed=malformed), seconds=1)
    log = result.requests
    assert len(log) > 0 and log.failures == len(log) and not log.finished.any()
    said = (tmp_path / "locust.stderr.log").read_text()
    assert ("without data: [DONE]" if malformed == "no-done" else "is not JSON") in said


def test_workers_send_their_token_records_to_the_master(tmp_path: Path) -> None:
    result = run(tmp_path, OPENAI_CHAT, GenerationBehaviour(token_delay_ms=2.0), seconds=2, workers=2)
    log = result.requests
    assert len(log) > 10 and log.failures == 0 and {g["requests"] > 0 for g in result.generators} == {True}
    assert all(len(log.chunk_times_us(row)) == TOKENS for row in range(len(log)))
    assert all(log.chunk_times_us(row)[0] == log.ttft_us[row] for row in range(len(log)))


def test_open_loop_token_times_count_from_the_scheduled_send(tmp_path: Path) -> None:
    plan = compile_traffic(TrafficSpec(rate={"requests_per_second": 20, "duration_seconds": 2, "max_concurrency": 8}))
    result = run(tmp_path, OPENAI_CHAT, GenerationBehaviour(first_token_ms=FIRST_MS, token_delay_ms=1.0), plan=plan)
    log = result.requests
    assert log.late_us is not None and log.failures == 0 and 30 <= len(log) <= 40
    assert (log.ttft_us >= FIRST_MS * 1000 + log.late_us).all()  # from the schedule: the late start is inside
    assert all(log.chunk_times_us(row)[-1] <= log.latency_us[row] for row in range(len(log)))
