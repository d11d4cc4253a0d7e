"""Search strategies as pure logic: the load search's steps, racing's eliminations, the sampler, the ask/tell flow."""

from __future__ import annotations

import dataclasses

import pytest

from recommender.candidates import CandidateResult, expand_candidates
from recommender.load.shapes import PlanLevel
from recommender.measurement.load_search import LoadSearch, probe_length, shortened
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.rules import Rules, WindowRules
from recommender.search import strategy_for
from recommender.search.racing import Entrant, judge, keep_count
from recommender.search.sampler import Sampler
from recommender.search.structure import cannot_win, same_as
from recommender.spec import ExperimentSpec


def run_search(meets_up_to: int, ipms: list[float], knee: float = 0.05) -> tuple[list[int], int | None]:
    search, tried = LoadSearch(len(ipms), knee), []
    while (index := search.ask()) is not None:
        tried.append(index)
        search.tell(index, index <= meets_up_to, ipms[index])
    return tried, search.found


@pytest.mark.parametrize(
    "meets_up_to, expected_tried, found",
    [
        (7, [0, 1, 3, 7], 7),  # steps 1, 2, 4 reach the top: every level meets
        (4, [0, 1, 3, 7, 5, 4], 4),  # breach at 7, bisect 3..7: 5 breaches, 4 meets
        (0, [0, 1], 0),  # the second level breaches
        (-1, [0], None),  # nothing meets
    ],
)
def test_load_search_steps_up_then_bisects(meets_up_to, expected_tried, found):
    ipms = [100.0 * (i + 1) for i in range(8)]
    assert run_search(meets_up_to, ipms) == (expected_tried, found)


def test_a_probe_level_is_the_warm_up_and_one_window_unless_the_experiment_sets_its_length():
    windows = WindowRules(warmup_s=2.0, window_s=3.0)
    assert probe_length(windows) == 5.0  # a point either way: racing widens it by its margin
    assert probe_length(windows, 4.0) == 4.0  # search.racing.probe_seconds
    level = PlanLevel(initial_users=4, spawn_rate=0.0, duration_seconds=30.0)  # 4 users from the start
    assert shortened(level, probe_length(windows)).duration_seconds == 5.0
    assert shortened(level, 60.0).duration_seconds == 30.0  # never longer than the plan's level
    spec = adaptive_spec()  # the spec's own window settings, as the job reads them
    assert probe_length(Rules.from_spec(spec).windows) == spec.traffic.warmup_seconds + spec.traffic.window_seconds


def test_load_search_stops_at_the_knee():
    ipms = [100, 200, 205, 206, 207, 208, 209, 210]  # flat after level 1
    tried, found = run_search(7, ipms)
    assert tried == [0, 1, 3] and found == 3


def entrant(name: str, mean: float | None, half: float = 10.0, n: int = 4) -> Entrant:
    interval = None if mean is None else Interval(mean, mean - half, mean + half, n, "windows")
    return Entrant(name, name, mean, interval)


@pytest.mark.parametrize(
    "probe, full, keep, measured, words",
    [
        (entrant("p", 900), [], 2, True, "first candidate that met the limits leads"),
        (entrant("p", None), [entrant("a", 1000)], 2, False, "no load level met"),
        (entrant("p", 500), [entrant("a", 1000)], 2, False, "below the lower bound 990 of the leader a"),
        (entrant("p", 950), [entrant("a", 1000)], 2, True, "2 of at most 2 measured in full"),
        (entrant("p", 950), [entrant("a", 1000), entrant("b", 980)], 2, False, "successive halving"),
        (
            entrant("p", 1050),
            [entrant("a", 1000), entrant("b", 980)],
            2,
            False,
            "upper bound 1,010 of a",
        ),  # not separable
        (
            entrant("p", 1120),
            [entrant("a", 1000), entrant("b", 980)],
            2,
            True,
            "above the upper bound of every",
        ),  # shown better
        (
            entrant("p", 950, n=1),
            [entrant("a", 1000)],
            1,
            False,
            "successive halving",
        ),  # no noise estimate: the point +10 %
    ],
)
def test_judge_measures_in_full_only_what_could_still_be_the_best(probe, full, keep, measured, words):
    verdict, why = judge(probe, full, margin=0.1, keep=keep)
    assert verdict is measured and words in why


def test_the_leader_is_the_highest_lower_bound():
    full = [entrant("wide", 1100, half=400), entrant("narrow", 1000, half=10)]  # leader: narrow (low 990 > 700)
    verdict, why = judge(entrant("p", 880, half=5), full, margin=0.1, keep=5)  # 885 x 1.1 = 973.5 < 990
    assert not verdict and "lower bound 990 of the leader narrow" in why


@pytest.mark.parametrize("n, eta, keep", [(12, 3, 4), (13, 3, 5), (2, 3, 1), (1, 2, 1)])
def test_keep_count_is_ceil_n_over_eta(n, eta, keep):
    assert keep_count(n, eta) == keep


def adaptive_spec(**search) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "s",
            "search": {"strategy": "adaptive", **search},
            "variants": {"instance_group_counts": [1, 2, 3], "max_batch_sizes": [4, 8], "dynamic_batching": [True]},
            "traffic": {"concurrency": {"users": [1, 2, 4], "duration_seconds": 10}},
        }
    )


def result(candidate, ipm: float | None, status: str = "ok", repeats: int = 1) -> CandidateResult:
    interval = Interval(ipm, ipm - 5, ipm + 5, 3, "windows") if ipm else None
    headline = Headline(max_invocations=ipm, ipm_interval=interval, level_load=4.0, repeats=repeats)
    return CandidateResult(
        candidate.key, candidate.name, candidate.config(), status, None, headline, None, 1, 1.0, None
    )


def drive(strategy, figures) -> list[tuple[str, str]]:
    """Ask until done as the job does: a probe is followed on its deployment, then told the stored result; a final
    is measured on a deployment of its own."""
    asked = []
    while (work := strategy.ask()) is not None:
        asked.append((work.stage, work.candidate.name))
        told = result(work.candidate, figures(work.candidate), repeats=work.repeats if work.stage == "final" else 1)
        then = strategy.follow(work, told.headline) if work.stage == "probe" else None
        if then is not None:
            asked.append(("full on the same deployment", work.candidate.name))
            told = result(work.candidate, figures(work.candidate), repeats=then.repeats)
        strategy.tell(work, told)
    return asked


def test_adaptive_probes_everything_then_measures_in_full_best_probe_first_only_what_could_lead():
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 3}, unimodal=[])  # no climb: every candidate probed
    candidates = expand_candidates(spec)  # ig1-mbs4, ig1-mbs8, ig2-mbs4, ig2-mbs8, ig3-mbs4, ig3-mbs8
    asked = drive(strategy_for(spec, candidates), lambda c: 100.0 * c.instance_group_count + c.max_batch_size)
    stages = [stage for stage, _ in asked]
    assert [name for stage, name in asked if stage == "probe"] == [c.name for c in candidates]
    assert stages.index("final") > max(i for i, stage in enumerate(stages) if stage == "probe")  # probes first
    # the last probe, 308, is the best: measured in full on the probe's deployment; 304 is within reach of its lower
    # bound 303 and the cap is 2; 208 (+10 %: 234) and the rest lie below 303
    assert [name for stage, name in asked if stage == "full on the same deployment"] == ["pt-db-ig3-mbs8"]
    assert [name for stage, name in asked if stage == "final"] == ["pt-db-ig3-mbs4"]
    assert [name for stage, name in asked if stage == "prune"] == [
        "pt-db-ig2-mbs8",
        "pt-db-ig2-mbs4",
        "pt-db-ig1-mbs8",
        "pt-db-ig1-mbs4",
    ]  # judged best probe first


def test_a_later_better_probe_is_measured_first_and_the_field_below_it_is_not():
    """The search before measured in full whatever was within reach of the leader found so far: here 100, 95, 98
    and 97 (the cap) and then 300, which separates: 5 full measurements. Best probe first: 1."""
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 3}, unimodal=[])
    candidates = expand_candidates(spec)
    figures = dict(zip([c.key for c in candidates], [100.0, 95.0, 98.0, 97.0, 300.0, 99.0], strict=True))
    asked = drive(strategy_for(spec, candidates), lambda c: figures[c.key])
    assert [name for stage, name in asked if stage == "final"] == ["pt-db-ig3-mbs4"]
    assert [stage for stage, _ in asked].count("prune") == 5
    assert "full on the same deployment" not in [stage for stage, _ in asked]  # the last probe is not the best


def test_adaptive_prunes_with_the_reason_and_caps_the_full_measurements():
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 3}, unimodal=[])
    candidates = expand_candidates(spec)
    best_first = {c.key: 1000.0 - 10 * i for i, c in enumerate(candidates)}  # within 10 % of the leader, none above
    strategy = strategy_for(spec, candidates)
    asked = drive(strategy, lambda c: best_first[c.key])
    assert [stage for stage, _ in asked].count("final") == 2  # ceil(6 / 3)
    assert asked[6:8] == [("final", candidates[0].name), ("final", candidates[1].name)]  # best probe first
    assert [stage for stage, _ in asked][-4:] == ["prune"] * 4


def test_adaptive_resume_judges_a_reused_probe_and_measures_it_on_its_own_deployment():
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 3})
    candidates = expand_candidates(spec)[:1]
    strategy = strategy_for(spec, candidates)
    probe = strategy.ask()
    strategy.tell(probe, result(probe.candidate, 500.0))  # reused from an earlier run: the job did not follow it
    final = strategy.ask()
    assert (final.stage, final.repeats, final.level) == ("final", 3, 4.0)
    strategy.tell(final, result(final.candidate, 500.0, repeats=3))
    assert strategy.ask() is None


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
    return ExperimentSpec.model_validate(
        {
            "name": "r",
            "search": {"strategy": "adaptive", "seed": seed, "budget": {"candidates": 12}},
            "variants": {
                "instance_group_counts": {"range": [1, 8]},
                "max_batch_sizes": {"range": [1, 64], "log": True},
            },
        }
    )


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
    assert all(
        1 <= c.instance_group_count <= 8 and 1 <= c.max_batch_size <= 64
        for c in expand_candidates(spec)
        if c.name in first
    )


def test_ranges_need_adaptive_search():
    with pytest.raises(ValueError, match="needs `search: adaptive`"):
        ExperimentSpec.model_validate({"name": "r", "variants": {"max_batch_sizes": {"range": [1, 64]}}})
    with pytest.raises(ValueError, match="first value must not be above"):
        ExperimentSpec.model_validate(
            {"name": "r", "search": "adaptive", "variants": {"max_batch_sizes": {"range": [8, 1]}}}
        )


def delay_spec(seed: int, strategy: str = "adaptive") -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "q",
            "search": {"strategy": strategy, "seed": seed, "budget": {"candidates": 6}},
            "variants": {
                "dynamic_batching": [False, {"max_queue_delay_microseconds": {"range": [0, 5000]}}],
                "instance_group_counts": [1, 2],
            },
        }
    )


def delays(seed: int) -> list[int | None]:
    sampler, found = Sampler(delay_spec(seed)), []
    for _ in range(6):
        candidate = sampler.ask()
        batching = candidate.config()["dynamic_batching"]
        found.append(batching["max_queue_delay_microseconds"] if batching else None)
        sampler.tell(candidate, 1000.0 - (found[-1] or 0) / 10)
    return found


def test_queue_delay_range_is_sampled_as_a_seeded_integer_within_the_range():
    first = delays(3)
    assert first == delays(3)
    sampled = [d for d in first if d is not None]
    assert sampled and all(isinstance(d, int) and 0 <= d <= 5000 for d in sampled)
    assert "dynamic_batching" in delay_spec(3).variants.ranged_axes()


def test_queue_delay_range_needs_adaptive_search():
    with pytest.raises(ValueError, match=r"variants.dynamic_batching: a .range: .low, high.. needs `search: adaptive`"):
        delay_spec(0, strategy="grid")


def preferred_spec(seed: int, strategy: str = "adaptive") -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "p",
            "search": {"strategy": strategy, "seed": seed, "budget": {"candidates": 8}},
            "variants": {
                "dynamic_batching": [{"preferred_batch_size": {"range": [1, 32], "log": True}}],
                "max_batch_sizes": [8, 32],
            },
        }
    )


def preferred_sizes(seed: int) -> list[tuple[int, list[int]]]:
    sampler, found = Sampler(preferred_spec(seed)), []
    for _ in range(8):
        candidate = sampler.ask()
        if candidate is None:
            break
        found.append((candidate.max_batch_size, candidate.config()["dynamic_batching"]["preferred_batch_size"]))
        sampler.tell(candidate, 100.0 * candidate.max_batch_size)
    return found


def test_preferred_batch_size_range_is_sampled_seeded_and_never_above_max_batch_size():
    first = preferred_sizes(5)
    assert first == preferred_sizes(5)
    assert len(first) >= 3
    for max_batch_size, preferred in first:
        assert len(preferred) <= 1 and all(1 <= size <= max_batch_size for size in preferred)
    assert any(preferred for _, preferred in first)
    assert len({(m, tuple(p)) for m, p in first}) == len(first)  # each proposal a new candidate
    assert "dynamic_batching" in preferred_spec(5).variants.ranged_axes()


def test_preferred_batch_size_range_needs_adaptive_search_and_sizes_from_one():
    with pytest.raises(ValueError, match=r"variants.dynamic_batching: a .range: .low, high.. needs `search: adaptive`"):
        preferred_spec(0, strategy="grid")
    with pytest.raises(ValueError, match="greater than or equal to 1"):
        ExperimentSpec.model_validate(
            {"name": "p", "variants": {"dynamic_batching": [{"preferred_batch_size": [0, 4]}]}}
        )


def test_the_sampler_chooses_the_target_too_when_there_are_several():
    spec = ExperimentSpec.model_validate(
        {
            "name": "t",
            "search": {"strategy": "adaptive", "seed": 1, "budget": {"candidates": 8}},
            "variants": {"instance_group_counts": {"range": [1, 4]}},
            "targets": [{"kind": "local", "instance_type": "small"}, {"kind": "local", "instance_type": "large"}],
        }
    )
    sampler, seen = Sampler(spec), []
    for _ in range(8):
        candidate = sampler.ask()
        seen.append(candidate.instance_type)
        sampler.tell(candidate, 100.0)
    assert set(seen) == {"small", "large"}


def run_capacity_first(meets_up_to: int, count: int = 8) -> tuple[list[int], int | None]:
    search, tried = LoadSearch(count, 0.05, capacity_first=True), []
    while (index := search.ask()) is not None:
        tried.append(index)
        search.tell(index, index <= meets_up_to, 100.0 * (index + 1))
    return tried, search.found


@pytest.mark.parametrize(
    "meets_up_to, expected_tried, found",
    [
        (7, [7], 7),  # the highest level meets: found at once, one level measured
        (4, [7, 0, 3, 5, 4], 4),  # it breaches: the level below is searched by bisection between 0 and the breach
        (-1, [7, 0], None),  # nothing meets
    ],
)
def test_capacity_first_tries_the_highest_level_first(meets_up_to, expected_tried, found):
    assert run_capacity_first(meets_up_to) == (expected_tried, found)


def test_capacity_first_with_one_level_is_the_plain_search():
    assert run_capacity_first(0, count=1) == ([0], 0)


def structure_spec(**search) -> ExperimentSpec:
    variants = {"instance_group_counts": [1, 2, 3, 4], "max_batch_sizes": [1, 8], "dynamic_batching": [True]}
    return ExperimentSpec.model_validate(
        {
            "name": "s",
            "search": {"strategy": "adaptive", **search},
            "variants": variants,
            "traffic": {"concurrency": {"users": [1, 4], "duration_seconds": 10}},
        }
    )


def test_a_candidate_past_a_fall_along_a_unimodal_axis_cannot_win_once_the_bound_is_below_the_leader():
    by_name = {c.name: c for c in expand_candidates(structure_spec())}
    ig1, ig2, ig3, ig4 = (by_name[f"pt-db-ig{n}-mbs8"] for n in (1, 2, 3, 4))
    axes, margin, leader = ["instance_group_counts"], 0.1, 950.0

    def why(candidate, probed, axes=axes, leader_low=leader):
        return cannot_win(candidate, probed, axes, margin, leader_low)

    said = why(ig3, [(ig1, 1000.0), (ig2, 800.0)])
    assert said is not None and "fell from 1,000 at pt-db-ig1-mbs8 to 800 at pt-db-ig2-mbs8" in said
    assert "instance count (taken as unimodal)" in said and "below the leader's lower bound 950" in said
    assert why(ig4, [(ig1, 1000.0), (ig2, 800.0)]) is not None  # further out: cut too
    assert why(ig3, [(ig1, 1000.0), (ig2, 800.0)], leader_low=850.0) is None  # 800 + 10 % could still lead
    assert why(ig3, [(ig1, 1000.0), (ig2, 800.0)], leader_low=None) is None  # no leader yet: nothing to lose to
    assert why(ig3, [(ig1, 1000.0), (ig2, 950.0)], leader_low=2000.0) is None  # within the margin: no fall seen
    assert why(ig3, [(ig1, 800.0), (ig2, 1000.0)], leader_low=2000.0) is None  # still rising
    assert why(ig3, [(ig2, 800.0)], leader_low=2000.0) is None  # one probe says nothing about a slope
    assert why(ig3, [(ig1, 1000.0), (ig2, None)]) is not None  # met no level: 0 IPM
    assert why(ig1, [(ig4, 1000.0), (ig3, 800.0)]) is not None  # falling the other way
    mbs1 = by_name["pt-db-ig1-mbs1"]  # another line (max batch size differs): says nothing about ig3-mbs8
    assert why(ig3, [(ig1, 1000.0), (by_name["pt-db-ig2-mbs1"], 100.0), (mbs1, 2000.0)]) is None
    assert why(ig3, [(ig1, 1000.0), (ig2, 800.0)], axes=[]) is None  # no unimodal axis: no rule


def test_adaptive_never_deploys_what_the_grids_structure_rules_out():
    spec = structure_spec(racing={"eta": 2, "final_repeats": 3})
    peak_at_two = {1: 1000.0, 2: 1200.0, 3: 700.0, 4: 900.0}  # ig4's figure would be a lie: it is never asked for
    asked = drive(
        strategy_for(spec, expand_candidates(spec)), lambda c: peak_at_two[c.instance_group_count] + c.max_batch_size
    )
    probed = [name for stage, name in asked if stage == "probe"]
    assert "pt-db-ig4-mbs1" not in probed and "pt-db-ig4-mbs8" not in probed
    # ruled out while probing (the leader's bound then: the best probe, 1,208, less the margin), before racing's
    assert [name for stage, name in asked if stage == "prune"][:2] == ["pt-db-ig4-mbs1", "pt-db-ig4-mbs8"]
    assert asked.index(("prune", "pt-db-ig4-mbs1")) < asked.index(("final", "pt-db-ig2-mbs8"))
    off = structure_spec(racing={"eta": 2, "final_repeats": 3}, unimodal=[])
    asked = drive(strategy_for(off, expand_candidates(off)), lambda c: peak_at_two[c.instance_group_count])
    assert len([1 for stage, _ in asked if stage == "probe"]) == 8  # [] probes every candidate


def test_probes_ask_for_the_highest_level_first():
    spec = adaptive_spec()
    work = strategy_for(spec, expand_candidates(spec)).ask()
    assert (work.stage, work.capacity_first) == ("probe", True)


def test_without_dynamic_batching_max_batch_size_changes_nothing_that_runs():
    spec = structure_spec(unimodal=[])
    spec = spec.model_copy(
        update={
            "variants": spec.variants.model_copy(update={"dynamic_batching": [False, True], "max_batch_sizes": [1, 8]})
        }
    )
    by_name = {c.name: c for c in expand_candidates(spec)}
    nodb1, nodb8, db1, db8 = (
        by_name[n] for n in ("pt-nodb-ig1-mbs1", "pt-nodb-ig1-mbs8", "pt-db-ig1-mbs1", "pt-db-ig1-mbs8")
    )
    said = same_as(nodb8, [(nodb1, 900.0)])
    assert said is not None and "serves exactly as pt-nodb-ig1-mbs1 (probed)" in said[0] and said[1] == 900.0
    assert same_as(nodb8, [(db1, 900.0), (by_name["pt-nodb-ig2-mbs1"], 900.0)]) is None  # batching or count differ
    assert same_as(db8, [(db1, 900.0)]) is None  # the dynamic batcher forms batches up to max batch size
    assert same_as(nodb1, []) is None
    trt = dataclasses.replace(nodb8, optimization="trt")  # an engine built for its max batch size
    assert same_as(trt, [(dataclasses.replace(nodb1, optimization="trt"), 900.0)]) is None
    asked = drive(strategy_for(spec, expand_candidates(spec)), lambda c: 100.0 * c.instance_group_count)
    pruned = [name for stage, name in asked if stage == "prune"]
    assert {"pt-nodb-ig1-mbs8", "pt-nodb-ig2-mbs8"} <= set(pruned)  # never deployed
    assert "pt-nodb-ig1-mbs8" not in [name for stage, name in asked if stage == "probe"]
    climbing = climb_spec()  # the climb's leftovers that are the same server as a probed one say so
    climbing = climbing.model_copy(
        update={"variants": climbing.variants.model_copy(update={"dynamic_batching": [False]})}
    )
    strategy, reasons = strategy_for(climbing, expand_candidates(climbing)), {}
    while (work := strategy.ask()) is not None:
        reasons[work.candidate.name] = work.reason or ""
        strategy.tell(work, result(work.candidate, 1000.0 - 100 * abs(work.candidate.instance_group_count - 2)))
    assert all("serves exactly as" in reasons[f"pt-nodb-ig{n}-mbs16"] for n in range(1, 5))  # ig 1 to 4 probed
    assert "the climb in its slice stopped at pt-nodb-ig2-mbs4" in reasons["pt-nodb-ig5-mbs16"]  # ig5 never was


def climb_spec(**search) -> ExperimentSpec:
    variants = {
        "instance_group_counts": [1, 2, 3, 4, 5],
        "max_batch_sizes": [1, 2, 4, 8, 16],
        "dynamic_batching": [{"max_queue_delay_microseconds": 0}, {"max_queue_delay_microseconds": 100}],
    }
    return ExperimentSpec.model_validate(
        {
            "name": "c",
            "search": {"strategy": "adaptive", **search},
            "variants": variants,
            "traffic": {"concurrency": {"users": [1, 4], "duration_seconds": 10}},
        }
    )


def hill(c) -> float:
    """One peak per slice at 2 instances and max batch size 8 (the 100 us slice 20 % lower), falling away from it."""
    ranks = {1: 0, 2: 1, 4: 2, 8: 3, 16: 4}
    height = 1000.0 - 150 * abs(c.instance_group_count - 2) - 120 * abs(ranks[c.max_batch_size] - 3)
    return height * (0.8 if c.dynamic_batching.max_queue_delay_microseconds else 1.0)


def test_the_climb_finds_each_slices_peak_after_probing_a_fraction_of_it():
    spec = climb_spec()
    candidates = expand_candidates(spec)
    asked = drive(strategy_for(spec, candidates), hill)
    probed = [name for stage, name in asked if stage == "probe"]
    assert probed[0] == "pt-db-ig3-mbs4"  # the first slice starts in the middle of both axes
    assert probed.count("pt-db-ig2-mbs8") == 2 and len(probed) < len(candidates) / 2  # each slice's peak
    first_slice = probed.index("pt-db-ig2-mbs8")
    second_start = first_slice + 1 + probed[first_slice + 1 :].index("pt-db-ig2-mbs8")
    assert second_start == len(probed) - 5  # the next slice starts at the best point: 1 probe and its 4 neighbours
    finals = [name for stage, name in asked if stage in ("final", "full on the same deployment")]
    assert finals == ["pt-db-ig2-mbs8"]  # the peak of the higher slice; the other could at most tie it
    strategy = strategy_for(spec, candidates)
    reasons = {}
    while (work := strategy.ask()) is not None:
        if work.stage == "prune" and "climb" in (work.reason or ""):
            reasons[work.candidate.key] = work.reason
        strategy.tell(work, result(work.candidate, hill(work.candidate), repeats=work.repeats))
    assert len(reasons) == len(candidates) - len(probed)  # every candidate is accounted for, none silently
    [far] = [
        c for c in candidates if c.name == "pt-db-ig5-mbs1" and not c.dynamic_batching.max_queue_delay_microseconds
    ]
    said = reasons[far.key]
    assert "instance count and max batch size (taken as unimodal)" in said
    assert "stopped at pt-db-ig2-mbs8 (1,000 IPM), where no neighbour was higher" in said


def test_without_unimodal_axes_there_is_no_climb():
    spec = climb_spec(unimodal=[])
    asked = drive(strategy_for(spec, expand_candidates(spec)), hill)
    assert len([1 for stage, _ in asked if stage == "probe"]) == 50  # every candidate probed


def test_a_full_measurement_known_before_its_last_repeat_counts_as_measured_in_full():
    """Finals stop once known over repeats (at 3 of `final_repeats: 5`): complete is "ended by its stopping rule",
    not a repeat count. Counted by repeats, no final ever entered the field, and every probe 'led': 6 finals."""
    spec = adaptive_spec(racing={"eta": 3, "final_repeats": 5}, unimodal=[])
    candidates = expand_candidates(spec)
    best_first = {c.key: 1000.0 - 10 * i for i, c in enumerate(candidates)}
    strategy = strategy_for(spec, candidates)
    asked = []
    while (work := strategy.ask()) is not None:
        asked.append(work.stage)
        told = result(work.candidate, best_first[work.candidate.key])
        if work.stage == "final":  # known at the third repeat of the five allowed
            told = dataclasses.replace(told, headline=dataclasses.replace(told.headline, repeats=3, most_repeats=5))
        strategy.tell(work, told)
    assert asked.count("final") == 2  # ceil(6 / 3), as with every repeat run
    assert asked.count("prune") == 4
