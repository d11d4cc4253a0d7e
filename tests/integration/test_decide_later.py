"""Decide at decision time, end to end: a tiny model measured once (real tritonserver, Locust, SQLite), then ranked
under other thresholds and percentiles and run again with other limits without a second load; new model bytes or
another target are measured again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recommender.store.results import ResultStore
from tests.integration.test_cli_run import recommender
from tests.unit.tiny_model import save_pooling_model

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]

SPEC = """
name: later
model: {{source: torchscript, path: {model}}}
payload: {{sequence_length: 16}}
variants: {{optimizations: [pt], dynamic_batching: [false], instance_group_counts: [1], max_batch_sizes: [4]}}
target: {{instance_type: {instance_type}}}
traffic:
  warmup_seconds: 1
  window_seconds: 1
  phases:
    - {{initial_users: 1, spawn_rate: 0, duration_seconds: 5}}
    - {{initial_users: 2, spawn_rate: 0, duration_seconds: 5}}
latency_threshold: {{percentile: {percentile}, ms: {ms}}}
"""


def write_spec(workdir: Path, instance_type: str = "local-cpu", percentile: str = "p95", ms: float = 1000) -> None:
    text = SPEC.format(model=workdir / "model.pt", instance_type=instance_type, percentile=percentile, ms=ms)
    (workdir / "later.yaml").write_text(text)


def run_rows(workdir: Path) -> list[str]:
    return [r.status for r in ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}").runs("later")]


def rank(workdir: Path, *limits: str) -> dict:
    ranked = recommender(workdir, "rank", "later", "--json", *limits)
    assert ranked.returncode == 0, ranked.stdout + ranked.stderr
    return json.loads(ranked.stdout)


def test_measured_once_then_decided_under_any_limits_and_measured_again_only_when_the_measurement_changes(tmp_path):
    save_pooling_model(tmp_path / "model.pt", seed=0)
    write_spec(tmp_path)
    first = recommender(tmp_path, "run", "later.yaml")
    assert first.returncode == 0, first.stdout + first.stderr
    assert run_rows(tmp_path) == ["ok"]

    loose = rank(tmp_path, "--latency-threshold-ms", "1000", "--percentile", "p50")
    assert loose["recommended"] == "pt-nodb-ig1-mbs4" and (loose["threshold_ms"], loose["percentile"]) == (1000, "p50")
    strict = rank(tmp_path, "--latency-threshold-ms", "0.001", "--percentile", "p90")
    assert strict["recommended"] is None and (strict["threshold_ms"], strict["percentile"]) == (0.001, "p90")
    assert "above the 0.001 ms threshold" in strict["excluded"][0]["reasons"][0]
    p99 = rank(tmp_path, "--latency-threshold-ms", "1000", "--percentile", "p99")
    assert p99["percentile"] == "p99"
    assert run_rows(tmp_path) == ["ok"]  # three decisions, no second load

    write_spec(tmp_path, percentile="p90", ms=0.001)  # only the limits changed: re-decided, not re-measured
    again = recommender(tmp_path, "run", "later.yaml")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "stored, not measured again" in again.stdout and run_rows(tmp_path) == ["ok"]
    assert "No recommendation" in again.stdout

    save_pooling_model(tmp_path / "model.pt", seed=1)  # same path, new bytes: a new measurement
    assert recommender(tmp_path, "run", "later.yaml").returncode == 0
    assert run_rows(tmp_path) == ["ok", "ok"]

    write_spec(tmp_path, instance_type="local-cpu-b", percentile="p90", ms=0.001)  # another target
    assert recommender(tmp_path, "run", "later.yaml").returncode == 0
    assert run_rows(tmp_path) == ["ok", "ok", "ok"]
