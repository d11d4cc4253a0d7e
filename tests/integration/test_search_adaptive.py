"""Adaptive search end to end on the real tritonserver and real Locust (the tiny bert, SQLite): every candidate is
probed and the probes are stored; then, best probe first, the one that can be the best is measured in full on a
deployment of its own (it was not the last probe) and the one that cannot is pruned with its reason and its partial
figures; a pick is made; resuming measures nothing again."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from recommender.review import decided_from_store
from recommender.spec import load_spec
from recommender.store.results import ResultStore
from tests.fixtures_text import TINY_BERT_YAML
from tests.integration.test_cli_run import cli_env, servers_under

pytestmark = [pytest.mark.integration, pytest.mark.slow]

# The second candidate holds every request 20 ms for a batch that never fills (max_batch_size 8, at most 2 users):
# its MaxInvocations is a small fraction of the first's, so its probe lies below the leader's lower bound.
SPEC = (
    """name: adaptive-it
"""
    + TINY_BERT_YAML
    + """correctness: off
variants:
  optimizations: [pt]
  dynamic_batching: [false, {{max_queue_delay_microseconds: 20000}}]
  instance_group_counts: [1]
  max_batch_sizes: [8]
target: {{kind: local, instance_type: local-cpu}}
traffic:
  warmup_seconds: 1
  window_seconds: 1
  repeats: 2
  concurrency: {{users: [1, 2], duration_seconds: 4}}
latency_threshold: {{percentile: p95, ms: 3000}}
search: {{strategy: adaptive, racing: {{final_repeats: 2, eta: 2, margin: 0.1}}}}
"""
)


def run(workdir: Path, db: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "recommender", "run", str(workdir / "adaptive.yaml"), "--db", db],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=600,
        env=cli_env(),
    )


def test_adaptive_prunes_with_reason_and_figures_measures_the_leader_once_and_resumes_without_measuring(tmp_path: Path):
    (tmp_path / "adaptive.yaml").write_text(SPEC.format())
    db = f"sqlite:///{tmp_path / 'results.db'}"
    first = run(tmp_path, db)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    store = ResultStore.open(db)
    runs = [(r.candidate_id, r.status, r.reason, r.artifacts_dir) for r in store.runs("adaptive-it")]
    fast, slow = store.results("adaptive-it")  # grid order: batching off, then the 20 ms queue delay

    assert (fast.status, fast.headline.repeats) == ("ok", 2), fast  # measured in full...
    assert "measured in full, best probe first" in fast.reason and "first candidate that met the limits" in fast.reason
    probes = [r for r in store.history("adaptive-it") if r.key == fast.key and r.headline.repeats == 1]
    assert len(probes) == 1  # ...after its stored probe
    # probed in grid order, then the full measurement on a deployment of its own: a run folder of its own
    assert [d.endswith("-final") for _, _, _, d in runs] == [False, False, True]
    # capacity first: the highest level (2 users) met the limits, so it is the only level the probe ran
    assert {w.load for w in store.window_records(probes[0].run_id)} == {2.0}
    # the probe's default length: warm-up + one window (1 s + 1 s here), so one steady window
    assert len(store.window_records(probes[0].run_id)) == 1

    # below the leader's lower bound, or within reach of it but unable to pass its upper bound (the leader's 2 repeats
    # give a window interval on an effective n: wide on a busy host)
    assert slow.status == "pruned" and "pruned by racing" in slow.reason, slow
    assert "below the lower bound" in slow.reason or "could at most tie" in slow.reason, slow
    assert slow.headline.max_invocations < fast.headline.max_invocations / 2  # its partial figures, kept
    assert store.window_records(slow.run_id), "the pruned candidate's probe windows are stored"

    decided = {r.key: r for r in decided_from_store(store, "adaptive-it", load_spec(tmp_path / "adaptive.yaml"))}
    assert decided[fast.key].headline.max_invocations and decided[slow.key].status == "pruned"  # the pick: fast
    assert "pruned" in first.stdout

    again = run(tmp_path, db)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert [
        (r.candidate_id, r.status, r.reason, r.artifacts_dir) for r in store.runs("adaptive-it")
    ] == runs  # nothing new
    assert [r.status for r in store.results("adaptive-it")] == ["ok", "pruned"]
    assert servers_under(tmp_path) == []
