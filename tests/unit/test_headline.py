"""The typed headline: what the store keeps (to_dict) reads back as the same record, older rows included."""

from __future__ import annotations

import json

import pytest

from recommender.metrics.headline import ChosenWindow, Headline, ServerStats, WindowCount
from recommender.metrics.intervals import Interval

MEASURED = Headline(
    percentile="p90",
    invocations_per_minute=1200.0,
    max_invocations=1200.0,
    latency_ms={"p50": 5.0, "p90": 8.0, "p95": 9.0, "p99": None},
    model_latency_ms=8.0,
    error_rate=0.001,
    within_threshold=True,
    stable=False,
    ipm_interval=Interval(1200.0, 1100.0, 1300.0, 3),
    latency_interval=Interval(8.0, 7.5, 8.5, 3),
    repeats=3,
    samples=400,
    requests=5000,
    failures=5,
    phase_index=2,
    stop_reason="max invocations: x",
    stop_reasons=("max invocations: x", None, None),
    notes=("a note",),
    flags=("late sends",),
    windows=WindowCount(5.0, 12, 9, (ChosenWindow(2, 1, 10.0, 15.0, 400), None, None)),
)


def test_the_stored_json_reads_back_as_the_same_record():
    stored = json.loads(json.dumps(MEASURED.to_dict()))
    assert Headline.from_dict(stored) == MEASURED
    assert Headline.from_dict(None) is None and Headline.from_dict({}) is None


def test_a_row_stored_before_max_invocations_reads_its_figures_as_max_invocations_when_within():
    old = {"invocations_per_minute": 300.0, "latency_ms": {"p95": 45.0}, "error_rate": 0.0, "within_threshold": True}
    h = Headline.from_dict(old)
    assert (h.max_invocations, h.model_latency_ms, h.stable, h.ipm_interval) == (300.0, 45.0, None, None)
    over = Headline.from_dict(old | {"within_threshold": False})
    assert (over.max_invocations, over.model_latency_ms, over.invocations_per_minute) == (None, None, 300.0)
    assert h.latency("p50") is None and h.repeats == 1


@pytest.mark.parametrize(
    ("stored", "batch", "queue_us"),
    [
        (
            {
                "avg_batch_size": 1.5,
                "avg_us": {"queue": 900.0},
                "at_max_invocations": {"queue_us": 100.0, "avg_batch_size": 3.0},
            },
            3.0,
            100.0,
        ),
        ({"avg_batch_size": 1.5, "avg_us": {"queue": 900.0}, "at_max_invocations": {}}, 1.5, 900.0),
        (None, None, None),
    ],
)
def test_server_figures_prefer_the_max_invocations_window(stored, batch, queue_us):
    server = ServerStats.from_dict(stored)
    assert server.batch_size() == batch and server.time_per_request_us()["queue"] == queue_us
