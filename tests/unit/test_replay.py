"""The replay simulator (benchmarks/replay.py): strategies run as the job runs them, on windows drawn from a stored
grid; its reference figures come from the store, its draws from the seed."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import replay

from recommender.candidates import expand_candidates
from recommender.metrics.headline import Headline
from recommender.metrics.steady import Window
from recommender.metrics.summary import WindowStats
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

SPEC = {
    "name": "stored-grid",
    "variants": {"dynamic_batching": [True], "instance_group_counts": [1, 2, 3, 4], "max_batch_sizes": [1, 8]},
    "traffic": {
        "warmup_seconds": 1,
        "window_seconds": 1,
        "repeats": 1,
        "concurrency": {"users": [1, 4, 16], "duration_seconds": 7},
    },
    "latency_threshold": {"percentile": "p95", "ms": 100},
}
PEAK = {1: 60_000.0, 2: 100_000.0, 3: 50_000.0, 4: 40_000.0}  # instance count: rises to 2, then falls
WOBBLE = (1.0, 1.02, 0.98, 1.01, 0.99, 1.0)
STAGES = {"export": 0.0, "deploy": 4.0, "probe": 0.1, "correctness": 0.0, "load": 23.0, "teardown": 2.9}


def windows(top_ipm: float) -> list[tuple[int, Window]]:
    out = []
    for phase, (load, share) in enumerate(((1, 0.2), (4, 0.6), (16, 1.0))):
        for index, wobble in enumerate(WOBBLE):
            ipm = top_ipm * share * wobble
            stats = WindowStats(phase * 7 + index, phase * 7 + index + 1, 100, 100, 0, ipm, {"p95": 5.0 * load})
            out.append((0, Window(phase, index, stats, load)))
    return out


@pytest.fixture
def stored(tmp_path: Path) -> tuple[str, ExperimentSpec]:
    url, spec = f"sqlite:///{tmp_path / 'grid.db'}", ExperimentSpec.model_validate(SPEC)
    store = ResultStore.open(url)
    experiment = store.save_experiment(spec, status="done")
    for candidate in expand_candidates(spec):
        run = store.start_run(store.save_candidate(experiment, candidate), "grid-protocol", None)
        top = PEAK[candidate.instance_group_count] * (1.3 if candidate.max_batch_size == 8 else 1.0)
        store.finish_run(run, "ok", headline=Headline(repeats=1), server_stats={"stages": STAGES}, windows=windows(top))
    return url, spec


def test_the_stored_grid_is_read_with_its_costs_and_its_best(stored):
    grid = replay.load_grid(*stored)
    assert len(grid.stored) == 8 and grid.loads == [1, 4, 16]
    assert grid.seconds == pytest.approx(8 * sum(STAGES.values()))
    assert grid.run_start_s == pytest.approx(23.0 - 21.0)  # the load stage beyond its nominal 3 x 7 s
    best = grid.best()
    assert best.candidate.name == "pt-db-ig2-mbs8" and best.truth.level_load == 16
    assert grid.standing(best.candidate.key) == "same"
    ig4 = next(k for k, s in grid.stored.items() if s.candidate.name == "pt-db-ig4-mbs1")
    assert grid.standing(ig4) == "NOT tied"


def test_adaptive_replays_find_the_best_without_deploying_past_the_fall(stored):
    grid = replay.load_grid(*stored)
    outcomes = []
    for label, make in replay.strategies(grid, final_repeats=3, probe_seconds=None).items():
        strategy, shape = make()
        outcome = replay.simulate(strategy, replay.Replay(grid, seed=1, probe_seconds=None), shape)
        assert grid.standing(outcome.pick) == "same", label
        outcomes.append((label, outcome))
    (_, now), (_, before) = outcomes
    # ig4 is past the fall from ig2 to ig3, far below ig2: 6 probes, and the best measured in full on a deployment of
    # its own (it was not the last probe)
    assert now.pruned_unprobed == 2 and now.deployed == 6 + 1 and now.full == 1
    assert before.pruned_unprobed == 0 and before.deployed == 8 + 1 and before.full == 1
    assert now.seconds < before.seconds and now.seconds < grid.seconds  # the grid stored 1 repeat, finals run 3
    # one full measurement, the last thing deployed: the first full measurement is the pick, at the search's end
    assert now.first is not None and now.first[0] == now.pick and now.first[1] == pytest.approx(now.seconds)


def test_a_replay_is_decided_by_its_seed(stored):
    grid = replay.load_grid(*stored)
    _, make = next(iter(replay.strategies(grid, 3, None).items()))
    first = [replay.simulate(*make()[:1], replay.Replay(grid, seed, None), make()[1]).seconds for seed in (3, 3)]
    assert first[0] == first[1]


def test_the_stored_100_candidate_grid_replays_from_the_checkout(capsys):
    """The grid docs/benchmarks.md "Replay" reports ships with the checkout (xz): its figures can be replayed."""
    root = Path(__file__).resolve().parents[2]
    stored, spec = root / "benchmarks/data/grid100.db.xz", root / "benchmarks/replay_grid100.yaml"
    code = replay.main(["--db", str(stored), "--spec", str(spec), "--seeds", "3"])
    out = capsys.readouterr().out
    assert code == 0 and "stored grid: 100 candidates (0 not measured ok, left out), 2,464 s" in out
    assert "best pt-db-ig1-mbs16@0us 577,780 IPM" in out
    assert "adaptive: pick same as or tied with the best in 3 of 3 seeds" in out
    assert "within 10 % in " in out and "adaptive: its first full measurement was same as or tied" in out
