"""Triton statistics deltas: queue/compute split and average batch size."""

import pytest

from recommender.metrics.triton_stats import stats_delta


def snapshot(success, queue_ns, infer_ns, inferences, executions):
    return {
        "model_stats": [
            {
                "name": "model",
                "inference_count": inferences,
                "execution_count": executions,
                "inference_stats": {
                    "success": {"count": success, "ns": 0},
                    "fail": {"count": 0, "ns": 0},
                    "queue": {"count": success, "ns": queue_ns},
                    "compute_input": {"count": success, "ns": 0},
                    "compute_infer": {"count": success, "ns": infer_ns},
                    "compute_output": {"count": success, "ns": 0},
                },
            }
        ]
    }


def test_delta_gives_per_request_averages_and_batch_size():
    before = snapshot(10, 1_000_000, 5_000_000, 10, 10)
    after = snapshot(110, 21_000_000, 405_000_000, 110, 35)  # 100 requests in 25 executions
    delta = stats_delta(before, after)
    assert delta.inference_count == 100 and delta.execution_count == 25
    assert delta.avg_batch_size == 4.0
    assert delta.avg_us["queue"] == pytest.approx(200.0)  # 20 ms over 100 requests
    assert delta.avg_us["compute_infer"] == pytest.approx(4000.0)


def test_no_traffic_gives_no_averages():
    same = snapshot(5, 10, 10, 5, 5)
    delta = stats_delta(same, same)
    assert delta.avg_batch_size is None and delta.avg_us["queue"] is None
