"""A run on the user's payload file, end to end: a real job (real Locust against the null endpoint behind the remote
target, a real SQLite store) stores what it was sent (fingerprint, token-length histogram); run again on the same
requests it resumes, on a changed file it measures again; the figures in tokens follow from the stored payload."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from recommender.decide.recommendation import recommend
from recommender.job.pipeline import Job, JobOptions
from recommender.load.null_endpoint import NullEndpoint
from recommender.load.payload import request_token_ids
from recommender.metrics.payload_lengths import PayloadLengths
from recommender.report import build_report, render_csv
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from tests.unit.test_pipeline_budget import Recorder

pytestmark = pytest.mark.integration


def spec_for(url: str, payload: Path) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "own-traffic",
            "correctness": "off",
            "payload": {"file": str(payload)},
            "target": {"kind": "remote", "endpoint": f"{url}/v2/models/existing", "price_per_hour": 1.5},
            "variants": {"dynamic_batching": [False]},
            "traffic": {
                "warmup_seconds": 0,
                "window_seconds": 0.5,
                "phases": [{"initial_users": 1, "duration_seconds": 2}],
            },
        }
    )


def test_a_run_stores_its_payload_resumes_on_the_same_requests_and_measures_a_changed_file_again(tmp_path):
    payload = tmp_path / "queries.jsonl"
    payload.write_text(
        "".join(json.dumps({"text": t}) + "\n" for t in ("short one", "a somewhat longer query about serving"))
        + json.dumps({"input_ids": [101] + [2023] * 30 + [102]})
        + "\n"
    )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with NullEndpoint(delay_ms=1) as url:
        spec = spec_for(url, payload)
        first = Recorder()
        (result,) = Job(spec, store, JobOptions(run_root=tmp_path / "runs"), first).run()
        again = Recorder()
        Job(spec, store, JobOptions(run_root=tmp_path / "runs"), again).run()
        payload.write_text(payload.read_text() + json.dumps({"text": "one request more"}) + "\n")
        changed = Recorder()
        (remeasured,) = Job(spec, store, JobOptions(run_root=tmp_path / "runs"), changed).run()
    assert result.status == "ok", result.reason
    sent = PayloadLengths.from_dict(result.payload)
    lengths = [len(row) for row in request_token_ids(spec.payload)[:3]]
    assert sent is not None and sent.requests == 3 and sent.source == "queries.jsonl"
    assert (sent.min_tokens, sent.max_tokens, sent.mean_tokens) == (min(lengths), 32, sum(lengths) / 3)
    assert [reused for *_, reused in first.finished] == [False]
    assert [reused for *_, reused in again.finished] == [True]  # the same requests: the stored run resumes
    assert [reused for *_, reused in changed.finished] == [False]  # a changed file: measured again
    assert remeasured.protocol_key != result.protocol_key and PayloadLengths.from_dict(remeasured.payload).requests == 4

    rec = recommend([remeasured], spec)
    winner = rec.winner.candidate
    mean = PayloadLengths.from_dict(remeasured.payload).mean_tokens
    assert winner.input_tokens_per_second == pytest.approx(remeasured.headline.max_invocations / 60 * mean)
    row = build_report(rec).rows[0]
    assert row.cost_per_million_tokens == pytest.approx(row.cost_per_million / mean)
    assert "input tokens per second per instance" in render_csv(build_report(rec)).splitlines()[0]
