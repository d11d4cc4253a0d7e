"""The fidelity benchmark's batching figures (issue 37 item 9): Triton's mean batch per execution over a run, and a
closed loop's re-send gap (answer -> the send it released), matched in time order the same way for both tools."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from batching import ServerCounts, gap_summary, resend_gaps_us


class Stats:
    """A deployment whose statistics are Triton's model statistics at one moment."""

    def __init__(self, inferences: int, executions: int, compute_ns: int) -> None:
        self.figures = {
            "model_stats": [
                {
                    "inference_count": inferences,
                    "execution_count": executions,
                    "inference_stats": {"compute_infer": {"count": executions, "ns": compute_ns}},
                }
            ]
        }

    def statistics(self) -> dict:
        return self.figures


def test_the_mean_batch_is_inferences_per_execution_over_the_run():
    before, after = ServerCounts.read(Stats(100, 80, 8_000_000)), ServerCounts.read(Stats(400, 180, 28_000_000))
    compute_ms, batch = ServerCounts.delta(before, after)
    assert batch == pytest.approx(300 / 100)
    assert compute_ms == pytest.approx(20_000_000 / 100 / 1e6)
    assert np.isnan(ServerCounts.delta(after, after)[1])


def test_each_send_after_the_first_per_user_is_matched_to_the_answer_before_it():
    """2 users: sends at 0 and 0.001; answers at 0.010 and 0.012; re-sends 50 us and 2 ms after them."""
    sent = np.array([0.0, 0.001, 0.010050, 0.014])
    done = np.array([0.010, 0.012, 0.020, 0.025])
    gaps = resend_gaps_us(sent, done, users=2)
    assert gaps == pytest.approx([50.0, 2000.0])
    p50, p95 = gap_summary(gaps)
    assert p50 == pytest.approx(1025.0) and p95 == pytest.approx(50 + 0.95 * 1950)
    assert np.isnan(gap_summary(resend_gaps_us(sent[:2], done[:2], users=2))[0])
