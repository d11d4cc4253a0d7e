"""`max_parallel` over two hosts: a candidate on D1 and one on D2 run at the same time, ranked together, each priced
as its own target."""

from __future__ import annotations

from pathlib import Path

from recommender.review import recommend_from_store
from recommender.store.results import ResultStore
from tests.multihost.conftest import Server, cli_env, recommender
from tests.multihost.lab import Lab

PRICES = {"d1-box": 1.0, "d2-box": 3.0}


def test_two_targets_on_two_hosts_run_at_once_and_rank_together(
    lab: Lab, d1: Server, d2: Server, tmp_path: Path
) -> None:
    targets = "".join(
        f"  - {{kind: remote, endpoint: '{server.endpoint}', instance_type: {name}, price_per_hour: {PRICES[name]}}}\n"
        for name, server in (("d1-box", d1), ("d2-box", d2))
    )
    (tmp_path / "par.yaml").write_text(
        "name: mh-parallel\ncorrectness: off\nvariants: {dynamic_batching: [false]}\nmax_parallel: 2\n"
        f"targets:\n{targets}"
        "traffic: {warmup_seconds: 1, window_seconds: 2, phases: [{initial_users: 2, duration_seconds: 8}]}\n"
    )
    before = (d1.inference_count(), d2.inference_count())
    done = lab.run("a", recommender("run", "par.yaml"), timeout=240, cwd=tmp_path, env=cli_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    runs = [r for r in store.runs("mh-parallel") if r.status == "ok"]
    assert len(runs) == 2
    first, second = sorted(runs, key=lambda r: r.started_at)
    assert second.started_at < first.finished_at  # measured at the same time, each on its own host
    assert d1.inference_count() > before[0] + 100 and d2.inference_count() > before[1] + 100
    rec, _, _ = recommend_from_store(store, "mh-parallel")
    ranked = {r.candidate.instance_type: r for r in rec.ranking.ranked}
    assert set(ranked) == set(PRICES)  # ranked together
    for name, price in PRICES.items():  # each priced as its own target
        assert rec.candidate_pricing[ranked[name].candidate.key].price_per_hour == price
