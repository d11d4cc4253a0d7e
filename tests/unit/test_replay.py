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
    assert len(grid.stored) == 8 and grid.loads == [1, 4, 16] and grid.repeats == [0]
    assert grid.seconds == pytest.approx(8 * sum(STAGES.values()))
    assert grid.run_start_s == pytest.approx(23.0 - 21.0)  # the load stage beyond its nominal 3 x 7 s
    reading = grid.in_sample(0)
    best = grid.stored[reading.best]
    assert best.candidate.name == "pt-db-ig2-mbs8" and best.truth[0].level_load == 16
    assert reading.standing(reading.best) == "same"
    ig4 = next(k for k, s in grid.stored.items() if s.candidate.name == "pt-db-ig4-mbs1")
    assert reading.standing(ig4) == "NOT tied"
    assert grid.held_out(0) is None and grid.run_to_run() == (0.0, 0, 0)  # one repeat: nothing held out


def test_adaptive_replays_find_the_best_without_deploying_past_the_fall(stored):
    grid = replay.load_grid(*stored)
    outcomes = []
    for label, make in replay.strategies(grid, final_repeats=3, probe_seconds=None).items():
        strategy, shape = make()
        outcome = replay.simulate(strategy, replay.Replay(grid, seed=1, probe_seconds=None), shape)
        assert grid.in_sample(0).standing(outcome.pick) == "same", label
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
    assert code == 0 and "stored grid: 100 candidates (0 not measured ok, left out), 2 repeat(s); 2,689 s" in out
    assert "run to run: one repeat's MaxInvocations varies by 16.7% (relative sd, pooled, df 100)" in out
    assert "drawn from repeat 0, in-sample: best pt-db-ig3-mbs8@1000us 487,930 IPM" in out
    assert "drawn from repeat 0, held-out: best pt-db-ig2-mbs8@100us 467,580 IPM [311,175, 623,985] (n=200 " in out
    assert "adaptive, in-sample: pick same as or tied with the best in 3 of 3 seeds" in out
    assert "adaptive, held-out: pick same as or tied with the best in 3 of 3 seeds" in out
    assert "within 10 % in " in out and "adaptive, in-sample: its first full measurement was same as or tied" in out


TWO = {  # 20 candidates measured with 2 repeats
    **SPEC,
    "name": "two-repeats",
    "variants": {"dynamic_batching": [True], "instance_group_counts": [1, 2, 3, 4, 5], "max_batch_sizes": [1, 2, 4, 8]},
    "traffic": {**SPEC["traffic"], "repeats": 2},
}
LUCKY = "pt-db-ig5-mbs1"  # serves 40,000 IPM; in repeat 0 it read 200,000 by chance: the best there


def planted(candidate) -> tuple[float, float]:
    """A candidate's top figure in repeats 0 and 1: within 1 % of each other, but for the lucky one."""
    if candidate.name == LUCKY:
        return 200_000.0, 40_000.0
    top = PEAK.get(candidate.instance_group_count, 30_000.0) * (1 + candidate.max_batch_size / 30)
    wobble = 0.01 * (candidate.instance_group_count % 3 - 1)
    return top * (1 + wobble), top * (1 - wobble)


@pytest.fixture
def two_repeats(tmp_path: Path) -> tuple[str, ExperimentSpec]:
    url, spec = f"sqlite:///{tmp_path / 'grid.db'}", ExperimentSpec.model_validate(TWO)
    store = ResultStore.open(url)
    experiment = store.save_experiment(spec, status="done")
    stages = {**STAGES, "load": 2 * 23.0}
    for candidate in expand_candidates(spec):
        run = store.start_run(store.save_candidate(experiment, candidate), "grid-protocol", None)
        both = [(repeat, w) for repeat, top in enumerate(planted(candidate)) for _, w in windows(top)]
        store.finish_run(run, "ok", headline=Headline(repeats=2), server_stats={"stages": stages}, windows=both)
    return url, spec


def test_the_held_out_judge_catches_a_candidate_best_in_one_repeat_by_chance(two_repeats):
    """Drawn from repeat 0, the search picks the candidate that was best there by chance; judged on the windows it was
    drawn from (in-sample) it is "same", judged on the other repeat with the run-to-run variance in, "NOT tied"."""
    grid = replay.load_grid(*two_repeats)
    assert grid.repeats == [0, 1] and len(grid.stored) == 20
    assert grid.seconds == pytest.approx(20 * sum(STAGES.values()))  # the reference: a one-repeat grid
    assert grid.run_start_s == pytest.approx(23.0 - 21.0)
    lucky = next(k for k, s in grid.stored.items() if s.candidate.name == LUCKY)
    _, make = list(replay.strategies(grid, 3, None).items())[1]  # bottom-up: every candidate probed
    strategy, shape = make()
    sampled = replay.Replay(grid, seed=0, probe_seconds=None)
    assert sampled.sample == 0
    outcome = replay.simulate(strategy, sampled, shape)
    assert outcome.pick == lucky
    in_sample, held_out = grid.in_sample(0), grid.held_out(0)
    assert held_out is not None
    assert in_sample.best == lucky and in_sample.standing(lucky) == "same"
    assert grid.stored[held_out.best].candidate.name == "pt-db-ig2-mbs8"
    assert held_out.standing(lucky) == "NOT tied"


def test_the_run_to_run_spread_is_pooled_over_the_candidates_repeats(two_repeats):
    grid = replay.load_grid(*two_repeats)
    spread, df, _ = grid.run_to_run()
    # by hand from the planted figures: each candidate's two repeats around their mean, relative, squared, summed
    squares = 0.0
    for s in grid.stored.values():
        a, b = planted(s.candidate)
        mean = (a + b) / 2
        squares += (a / mean - 1) ** 2 + (b / mean - 1) ** 2
    assert df == 20 and spread == pytest.approx((squares / 20) ** 0.5, rel=1e-3)
    held_out = grid.held_out(1)  # drawn from repeat 1: repeat 0 held out, where the lucky one is the best
    assert held_out is not None
    lucky = next(k for k, s in grid.stored.items() if s.candidate.name == LUCKY)
    figure, interval = held_out.figures[lucky]
    assert held_out.best == lucky and interval is not None
    assert interval.high - figure == pytest.approx(figure * 2.086 * spread, rel=1e-3)  # t(0.975, 20) x sd, 1 repeat


def test_further_repeats_a_tie_break_added_to_the_leaders_are_not_part_of_the_replayed_grid(two_repeats):
    """A grid run ends with the job's tie-break (decision.max_extra_seconds), which adds repeats 2, 3, ... to the two
    leaders' runs (job/tiebreak.py). The replay's grid is the traffic plan's repeats only: a further repeat would be
    counted as a stored repeat of its own, held out against, and would spread the run's start cost over its count."""
    url, spec = two_repeats
    store = ResultStore.open(url)
    (result,) = [r for r in store.results(spec.name, store.current_protocols(spec.name) or "") if r.name == LUCKY]
    assert result.run_id is not None
    extra = [(2, w) for _, w in windows(900_000.0)]  # a further repeat, far above anything the grid measured
    store.add_repeat(result.run_id, extra, Headline(repeats=3), result.server_stats)
    assert {r.repeat for r in store.window_records(result.run_id)} == {0, 1, 2}
    grid = replay.load_grid(url, spec)
    assert grid.repeats == [0, 1]
    lucky = next(k for k, s in grid.stored.items() if s.candidate.name == LUCKY)
    assert sorted(grid.stored[lucky].windows) == [0, 1]
