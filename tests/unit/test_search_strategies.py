"""Search strategies as pure logic: the load search's steps, racing's eliminations, the sampler, the ask/tell flow."""

from __future__ import annotations

import pytest

from recommender.candidates import CandidateResult, expand_candidates
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.search import strategy_for
from recommender.search.load_search import LoadSearch
from recommender.search.racing import Entrant, race
from recommender.search.sampler import Sampler
from recommender.spec import ExperimentSpec


def run_search(meets_up_to: int, ipms: list[float], knee: float = 0.05) -> tuple[list[int], int | None]:
    search, tried = LoadSearch(len(ipms), knee), []
    while (index := search.ask()) is not None:
        tried.append(index)
        search.tell(index, index <= meets_up_to, ipms[index])
    return tried, search.found


@pytest.mark.parametrize("meets_up_to, expected_tried, found", [
    (7, [0, 1, 3, 7], 7),          # steps 1, 2, 4 reach the top: every level meets
    (4, [0, 1, 3, 7, 5, 4], 4),    # breach at 7, bisect 3..7: 5 breaches, 4 meets
    (0, [0, 1], 0),                # the second level breaches
    (-1, [0], None),               # nothing meets
])
def test_load_search_steps_up_then_bisects(meets_up_to, expected_tried, found):
    ipms = [100.0 * (i + 1) for i in range(8)]
    assert run_search(meets_up_to, ipms) == (expected_tried, found)


def test_load_search_stops_at_the_knee():
    ipms = [100, 200, 205, 206, 207, 208, 209, 210]  # flat after level 1
    tried, found = run_search(7, ipms)
    assert tried == [0, 1, 3] and found == 3


def entrant(name: str, mean: float | None, half: float = 10.0, n: int = 4) -> Entrant:
    interval = None if mean is None else Interval(mean, mean - half, mean + half, n, "windows")
    return Entrant(name, name, mean, interval)


def test_racing_prunes_those_whose_interval_cannot_reach_the_leader():
    verdict = race([entrant("a", 1000), entrant("b", 990), entrant("c", 500), entrant("d", None)], margin=0.1, eta=2)
    assert verdict.survivors == ("a", "b")
    assert "below the lower bound 990 of the leader a" in verdict.pruned["c"]
    assert "no load level met" in verdict.pruned["d"]


def test_racing_halves_a_crowd_of_ties():
    crowd = [entrant(str(i), 1000 + i, half=100) for i in range(9)]
    verdict = race(crowd, margin=0.0, eta=3)
    assert verdict.survivors == ("8", "7", "6")
    assert "successive halving" in verdict.pruned["0"] and "ranks 9 of 9" in verdict.pruned["0"]


def test_racing_never_prunes_on_an_unknown_interval_alone():
    verdict = race([entrant("a", 1000, n=4), entrant("b", 950, n=1)], margin=0.1, eta=2)  # b: one window, no noise estimate
    assert verdict.survivors == ("a",) and "successive halving" in verdict.pruned["b"]
    assert race([entrant("a", 1000), entrant("b", 950, n=1)], margin=0.1, eta=1).survivors == ("a", "b")


def adaptive_spec(**search) -> ExperimentSpec:
    return ExperimentSpec.model_validate({
        "name": "s", "search": {"strategy": "adaptive", **search},
        "variants": {"instance_group_counts": [1, 2, 3], "max_batch_sizes": [4, 8], "dynamic_batching": [True]},
        "traffic": {"concurrency": {"users": [1, 2, 4], "duration_seconds": 10}}})


def result(candidate, ipm: float | None, status: str = "ok") -> CandidateResult:
    interval = Interval(ipm, ipm - 5, ipm + 5, 3, "windows") if ipm else None
    headline = Headline(max_invocations=ipm, ipm_interval=interval, level_load=4.0, repeats=1)
    return CandidateResult(candidate.key, candidate.name, candidate.config(), status, None, headline, None, 1, 1.0, None)


def drive(strategy, figures) -> list[tuple[str, str]]:
    """Ask until done, telling each probe the figure given for its candidate; returns (stage, name) in order."""
    asked = []
    while (work := strategy.ask()) is not None:
        asked.append((work.stage, work.candidate.name))
        strategy.tell(work, result(work.candidate, figures(work.candidate)))
    return asked


def test_adaptive_probes_everything_then_prunes_and_measures_the_survivors_in_full():
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 3})
    candidates = expand_candidates(spec)
    asked = drive(strategy_for(spec, candidates), lambda c: 100.0 * c.instance_group_count + c.max_batch_size)
    probes = [name for stage, name in asked if stage == "probe"]
    assert probes == [c.name for c in candidates]
    assert [name for stage, name in asked if stage == "final"] == ["pt-db-ig3-mbs8", "pt-db-ig3-mbs4"]
    assert len([1 for stage, _ in asked if stage == "prune"]) == 4


def test_adaptive_budget_records_the_rest_as_not_measured():
    spec = adaptive_spec(budget={"candidates": 2})
    asked = drive(strategy_for(spec, expand_candidates(spec)), lambda c: 100.0)
    assert [stage for stage, _ in asked].count("probe") == 2
    assert [stage for stage, _ in asked].count("skip") == 4


def test_grid_asks_for_every_candidate_in_full():
    spec = adaptive_spec().model_copy(update={"search": adaptive_spec().search.model_copy(update={"strategy": "grid"})})
    asked = drive(strategy_for(spec, expand_candidates(spec)), lambda c: 1.0)
    assert [stage for stage, _ in asked] == ["full"] * 6


def ranged_spec(seed: int) -> ExperimentSpec:
    return ExperimentSpec.model_validate({
        "name": "r", "search": {"strategy": "adaptive", "seed": seed, "budget": {"candidates": 12}},
        "variants": {"instance_group_counts": {"range": [1, 8]}, "max_batch_sizes": {"range": [1, 64], "log": True}}})


def proposals(seed: int) -> list[str]:
    sampler, names = Sampler(ranged_spec(seed)), []
    for _ in range(12):
        candidate = sampler.ask()
        names.append(candidate.name)
        sampler.tell(candidate, 100.0 * candidate.instance_group_count - abs(candidate.max_batch_size - 16))
    return names


def test_sampler_is_seeded_stays_in_range_and_never_repeats():
    first = proposals(7)
    assert first == proposals(7) and first != proposals(8)
    assert len(set(first)) == 12
    spec = ranged_spec(7)
    assert all(1 <= c.instance_group_count <= 8 and 1 <= c.max_batch_size <= 64
               for c in expand_candidates(spec) if c.name in first)


def test_ranges_need_adaptive_search():
    with pytest.raises(ValueError, match="needs `search: adaptive`"):
        ExperimentSpec.model_validate({"name": "r", "variants": {"max_batch_sizes": {"range": [1, 64]}}})
    with pytest.raises(ValueError, match="first value must not be above"):
        ExperimentSpec.model_validate({"name": "r", "search": "adaptive", "variants": {"max_batch_sizes": {"range": [8, 1]}}})
