"""variants.padding end to end (issue 36 items 2 and 3): one `recommender run` of a small BERT on the real local
Triton server with padding max, buckets and none, on a payload of requests of different lengths. Every padding passes
the correctness gate at the payload's shortest, median and longest request, is measured and ranked, and its stored
configuration says how it was padded (ragged batching on the real server: test_local_target.py)."""

from __future__ import annotations

import pytest

from recommender.store.results import ResultStore
from tests.integration.test_cli_run import recommender

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]

SPEC = """
name: padding
model: {source: bert, architecture: {layers: 1, hidden: 32, heads: 2, intermediate: 64}}
payload:
  texts:
    - "a short one"
    - "a request of middling length, a dozen words or so, give or take"
    - "and one long request that goes on and on, with clause after clause, so that it is several times as long as
       the shortest request of the payload and the padding of every request to it costs compute"
variants:
  optimizations: [pt]
  dynamic_batching: [{max_queue_delay_microseconds: 2000}]
  max_batch_sizes: [4]
  padding: [max, buckets, none]
traffic: {warmup_seconds: 1, phases: [{initial_users: 2, duration_seconds: 3}]}
"""


def test_each_padding_is_checked_measured_and_ranked(tmp_path) -> None:
    (tmp_path / "padding.yaml").write_text(SPEC)
    done = recommender(tmp_path, "run", "padding.yaml")
    assert done.returncode == 0, done.stdout + done.stderr

    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = {r.name: r for r in store.results("padding")}
    assert set(results) == {"pt-db-ig1-mbs4", "pt-db-ig1-mbs4-buckets", "pt-db-ig1-mbs4-none"}
    for name, result in results.items():
        assert result.status == "ok", (name, result.reason)
        assert result.correctness["passed"], (name, result.correctness)
        cases = {f["case"] for f in result.correctness["figures"]}
        assert {"sample text 1", "sample text 2", "sample text 3", "full batch (4 rows)"} <= cases, cases
        assert result.headline is not None and (result.headline.max_invocations or 0) > 0
    assert results["pt-db-ig1-mbs4-none"].config["padding"] == "none"
    assert "padding" not in results["pt-db-ig1-mbs4"].config  # max: the key it always had
    ranked = recommender(tmp_path, "rank", "padding")
    assert ranked.returncode == 0 and "pt-db-ig1-mbs4-buckets" in ranked.stdout, ranked.stdout
