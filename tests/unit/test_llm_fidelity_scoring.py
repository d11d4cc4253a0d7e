"""benchmarks/llm_fidelity.py's scoring rule (the one both tools are scored by), its request bodies and its verdicts,
on hand-built logs (no server, no tool)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import llm_fidelity

from recommender.metrics.records import RequestLog


def log(t_s: list[float], latency_ms: list[float], ttft_ms: list[float], output: list[int]) -> RequestLog:
    count = len(t_s)
    ones = np.ones(count, dtype=np.int32)
    return RequestLog(
        t_s=np.array(t_s),
        latency_us=np.array(latency_ms) * 1000,
        ok=np.ones(count, dtype=bool),
        users=ones,
        ttft_us=np.array(ttft_ms) * 1000,
        input_tokens=ones * 32,
        output_tokens=np.array(output),
        tokens_counted=np.zeros(count, dtype=bool),
        finished=np.ones(count, dtype=bool),
        chunk_start=np.zeros(count, dtype=np.int64),
        chunk_count=np.zeros(count, dtype=np.int32),
        chunk_us=np.zeros(0),
    )


def test_a_window_counts_the_requests_sent_in_it_and_done_by_its_end() -> None:
    # sent at 0.5 (warm-up), 1.0, 2.0, 3.0, 4.9 (done after the window's end at 5 s)
    records = log([0.5, 1.0, 2.0, 3.0, 4.9], [100, 110, 210, 410, 200], [10, 10, 20, 40, 10], [10, 11, 21, 41, 5])
    figures = llm_fidelity.score(records, warmup_s=1.0, span_s=4.0)
    assert figures.requests == 3
    assert figures.output_tps == pytest.approx((11 + 21 + 41) / 4.0)
    assert figures.request_tps == pytest.approx(3 / 4.0)
    assert figures.ttft_p50_ms == pytest.approx(20.0)
    assert figures.itl_p50_ms == pytest.approx(9.5)  # (110-10)/10, (210-20)/20, (410-40)/40 = 10, 9.5, 9.25
    assert figures.itl_p95_ms == pytest.approx(np.percentile([10.0, 9.5, 9.25], 95))


def test_an_open_loop_request_is_timed_from_its_actual_send() -> None:
    records = log([1.0, 2.0], [100, 200], [30, 40], [11, 11])
    late = RequestLog(**{**{n: getattr(records, n) for n in records.__dataclass_fields__}, "late_us": [20_000, 0]})
    figures = llm_fidelity.score(late, warmup_s=0.5, span_s=4.0)
    assert (figures.ttft_p50_ms, figures.ttft_p95_ms) == pytest.approx((25.0, 38.5))  # of 30 - 20 and 40 - 0 ms
    assert figures.itl_p50_ms == pytest.approx(np.median([(80 - 10) / 10, (200 - 40) / 10]))  # lateness cancels


def test_a_log_without_token_columns_is_no_result() -> None:
    plain = RequestLog(np.array([1.0]), np.array([1000]), np.array([False]), np.array([1]))
    with pytest.raises(ValueError, match="no generative records"):
        llm_fidelity.score(plain, 0.0, 10.0)
    with pytest.raises(ValueError, match="no answered request"):
        llm_fidelity.score(log([20.0], [5], [1], [3]), 0.0, 10.0)


def test_both_tools_get_the_same_prompt_and_output_length() -> None:
    chat = llm_fidelity.generation_bodies("chat", ["a b c"], 16)[0]
    completions = llm_fidelity.generation_bodies("completions", ["a b c"], 16)[0]
    assert chat["messages"] == [{"role": "user", "content": "a b c"}] and completions["prompt"] == "a b c"
    for body in (chat, completions):
        assert (body["max_tokens"], body["ignore_eos"], body["stream"]) == (16, True, True)
        assert body["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize(
    ("ours", "theirs", "kind", "within"),
    [
        (104.0, 100.0, "throughput", True),
        (94.0, 100.0, "throughput", False),
        (10.9, 10.0, "latency", True),
        (2.9, 2.0, "latency", True),
        (3.1, 2.0, "latency", False),
        (120.0, 100.0, "latency", False),
    ],
)
def test_targets_are_five_percent_and_ten_percent_or_one_ms(
    ours: float, theirs: float, kind: str, within: bool
) -> None:
    assert llm_fidelity._within(ours, theirs, kind) is within
