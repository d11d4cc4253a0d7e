"""Searching a generative stack's engine settings and load together, as pure logic with simulated candidates (no
server): the probe's bisection on the monotone load axis, and adaptive search ranking on goodput under the SLOs."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from recommender.candidates import Candidate, CandidateResult, expand_candidates
from recommender.measurement import load_search
from recommender.measurement.load_search import Bisection, LoadSearch, level_objective
from recommender.metrics.generation import GenerationFigure, GenerationFigures, KeptRequests, WindowGeneration
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.levels import WindowRecord, judge_levels
from recommender.metrics.rules import Rules
from recommender.search import strategy_for
from recommender.search.work import Work
from recommender.spec import ExperimentSpec


def bisect(count: int, boundary: int, capacity_first: bool = False) -> tuple[list[int], int | None]:
    """Levels 0..count-1 that meet the SLOs up to `boundary` (-1: none), goodput growing with the load."""
    search, tried = Bisection(count, 0.05, capacity_first), []
    while (index := search.ask()) is not None:
        tried.append(index)
        search.tell(index, index <= boundary, 100.0 * (index + 1))
    assert search.looks == len(tried)
    return tried, search.found


@pytest.mark.parametrize("count", [1, 2, 3, 7, 8, 9, 16, 33])
def test_the_bisection_finds_the_boundary_in_log2_of_the_levels_looks(count):
    for boundary in range(-1, count):
        tried, found = bisect(count, boundary)
        assert found == (boundary if boundary >= 0 else None)
        assert len(tried) <= math.ceil(math.log2(count + 1)), (boundary, tried)
        assert len(set(tried)) == len(tried)  # no level runs twice


@pytest.mark.parametrize("count", [2, 8, 9, 33])
def test_capacity_first_bisection_costs_one_look_more_at_most_and_one_in_all_when_the_top_meets(count):
    for boundary in range(-1, count):
        tried, found = bisect(count, boundary, capacity_first=True)
        assert found == (boundary if boundary >= 0 else None)
        assert len(tried) <= math.ceil(math.log2(count + 1)) + 1
    assert bisect(count, count - 1, capacity_first=True)[0] == [count - 1]


def test_the_stepping_search_needs_more_looks_than_the_bisection_on_a_long_axis():
    """What the bisection is for: 33 levels meeting up to 20, the stepping search walks up 1, 2, 4 ... first."""
    stepping, tried = LoadSearch(33, 0.0), 0
    while (index := stepping.ask()) is not None:
        stepping.tell(index, index <= 20, 100.0 * (index + 1))
        tried += 1
    assert stepping.found == 20 and len(bisect(33, 20)[0]) < tried


def test_a_meeting_level_with_less_goodput_than_a_lower_one_ends_the_bisection_with_a_note():
    """Goodput 600/min at level 4 (index 3), then 300/min at level 6 (index 5), both meeting the SLOs: past the
    saturation the assumption fails; the search goes no higher and says why."""
    goodput = {3: 600.0, 5: 300.0, 6: 200.0}
    search, tried = Bisection(8, 0.05), []
    while (index := search.ask()) is not None:
        tried.append(index)
        search.tell(index, index <= 6, goodput.get(index, 100.0 * (index + 1)))
    assert tried == [3, 5] and search.found == 5
    assert search.notes == [
        "load level 6 met the SLOs with a goodput of 300/min, below 600/min at a lower level: not monotone in the "
        "load, the bisection searched no higher"
    ]


def test_a_fall_within_the_tolerance_is_not_a_contradiction():
    search = Bisection(8, 0.05)
    search.tell(3, True, 600.0)
    search.tell(5, True, 580.0)  # 580 x 1.05 = 609 > 600: noise, the search goes on
    assert not search.done and search.notes == [] and search.ask() == 6


def generation(goodput_per_s: float) -> GenerationFigures:
    interval = Interval(goodput_per_s, goodput_per_s - 0.05, goodput_per_s + 0.05, 3, "windows")
    return GenerationFigures({"goodput": GenerationFigure(goodput_per_s, interval)})


def test_a_generative_runs_objective_is_its_goodput_per_minute_and_an_embedding_runs_is_max_invocations():
    ipm = Interval(900.0, 890.0, 910.0, 3)
    plain = Headline(max_invocations=900.0, ipm_interval=ipm)
    assert plain.objective == 900.0 and plain.objective_interval == ipm
    generative = dataclasses.replace(plain, generation=generation(10.0))  # 15 requests/s, 10 of them within the SLOs
    assert generative.objective == 600.0
    assert generative.objective_interval is not None and generative.objective_interval.low == pytest.approx(597.0)
    excluded = Headline(max_invocations=None, generation=generation(10.0))  # no level met the SLOs
    assert excluded.objective is None


def llm_spec() -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": "llm",
            "model": {"source": "llama", "architecture": {"layers": 2, "hidden": 64, "heads": 4}},
            "target": {"kind": "vllm"},
            "search": {"strategy": "adaptive", "racing": {"eta": 3, "final_repeats": 3}},
            "traffic": {"concurrency": {"users": [1, 2, 4, 8, 16], "duration_seconds": 10}},
            "slo": {"ttft_ms": {"p95": 500}, "itl_ms": {"p95": 100}},
        }
    )


def planted_grid(spec: ExperimentSpec) -> list[Candidate]:
    """12 engine configurations of the one vLLM candidate (max_num_seqs x prefix caching x chunked prefill), each its
    own server: as the engine settings' variants make them."""
    (base,) = expand_candidates(spec)
    grid = []
    for seqs in (2, 4, 8):
        for prefix in (False, True):
            for chunked in (False, True):
                args = {"max_num_seqs": seqs, "enable_prefix_caching": prefix, "enable_chunked_prefill": chunked}
                engine = json.dumps({"engine_args": args, "kv_cache_gib": 1.0}, sort_keys=True)
                grid.append(dataclasses.replace(base, max_batch_size=seqs, engine=engine))
    return grid


def settings(candidate: Candidate) -> tuple[int, bool, bool]:
    args = json.loads(candidate.engine)["engine_args"]
    return args["max_num_seqs"], args["enable_prefix_caching"], args["enable_chunked_prefill"]


def simulated(candidate: Candidate) -> tuple[float, float]:
    """(requests/min at the highest level meeting the SLOs, goodput/s there): planted so that the most requests
    (max_num_seqs 8) are not the most within the SLOs; the best, 4 seqs with prefix caching and chunked prefill,
    stands clear of the rest by more than the racing margin."""
    seqs, prefix, chunked = settings(candidate)
    requests = 300.0 + 40.0 * seqs + 5.0 * prefix + 2.0 * chunked
    goodput = {2: 3.0, 4: 4.0, 8: 2.0}[seqs] + (1.0 if prefix and chunked and seqs == 4 else 0.0)
    return requests, goodput


def told(candidate: Candidate, repeats: int) -> CandidateResult:
    requests, goodput = simulated(candidate)
    headline = Headline(
        max_invocations=requests,
        ipm_interval=Interval(requests, requests - 5, requests + 5, 3, "windows"),
        level_load=4.0,
        repeats=repeats,
        generation=generation(goodput),
    )
    return CandidateResult(candidate.key, candidate.name, candidate.config(), "ok", None, headline, None, 1, 1.0, None)


def test_adaptive_search_over_engine_settings_finds_the_planted_best_by_goodput_and_keeps_every_reason():
    spec = llm_spec()
    grid = planted_grid(spec)
    strategy = strategy_for(spec, grid)
    asked, full = [], []
    while (work := strategy.ask()) is not None:
        asked.append(work)
        result = told(work.candidate, work.repeats if work.stage == "final" else 1)
        then = strategy.follow(work, result.headline) if work.stage == "probe" else None
        if then is not None or work.stage == "final":
            full.append(work.candidate)
            result = told(work.candidate, (then or work).repeats)
        strategy.tell(work, result)
    best = max(grid, key=lambda c: simulated(c)[1])
    assert settings(best) == (4, True, True)
    assert full[0] == best  # best probe first: measured in full before any other
    assert max(full, key=lambda c: simulated(c)[1]) == best
    most_requests = max(grid, key=lambda c: simulated(c)[0])  # 8 seqs: ranked on requests/min it would lead
    assert most_requests not in full
    probes = [w for w in asked if w.stage == "probe"]
    assert probes and all(w.bisect for w in probes)  # every generative probe bisects its load axis
    pruned = [w for w in asked if w.stage == "prune"]
    assert {w.candidate.key for w in pruned} | {c.key for c in full} == {c.key for c in grid}
    assert all(w.reason and "good requests/min" in w.reason for w in pruned if "racing" in w.reason)
    assert any("racing" in (w.reason or "") for w in pruned)


def test_an_embedding_candidates_probe_does_not_bisect():
    spec = ExperimentSpec.model_validate(
        {
            "name": "s",
            "search": {"strategy": "adaptive", "unimodal": []},
            "variants": {"instance_group_counts": [1, 2], "max_batch_sizes": [4], "dynamic_batching": [True]},
            "traffic": {"concurrency": {"users": [1, 2, 4], "duration_seconds": 10}},
        }
    )
    work = strategy_for(spec, expand_candidates(spec)).ask()
    assert work is not None and work.stage == "probe" and not work.bisect


def test_a_generative_level_is_judged_on_its_goodput_and_an_embedding_level_on_its_ipm():
    """What the probe's search is told per tried level (measurement/load_search.search_load)."""
    spec = llm_spec()
    rules = Rules.from_spec(spec)
    kept = KeptRequests(ttft_ms=(100.0, 900.0), itl_ms=(10.0, 10.0), e2e_ms=(200.0, 1000.0))  # one TTFT above 500
    window = WindowGeneration(10.0, 100, 1600, None, {}, {}, None, kept)  # 10 requests/s, half within the SLOs
    record = WindowRecord(0, 0, 0, 4.0, 100, 0, 100, 600.0, {"p95": 300.0}, {}, window)
    (level,) = judge_levels([record], 1, rules.limits, rules.windows)
    assert level_objective(level, rules.limits) == pytest.approx(300.0)  # 5 good requests/s
    (plain,) = judge_levels([dataclasses.replace(record, generation=None)], 1, rules.limits, rules.windows)
    assert level_objective(plain, rules.limits) == 600.0


def test_a_probe_that_bisects_is_measured_by_the_bisection(monkeypatch):
    """measure_work hands the work's `bisect` to the load search (the deployment and the load are the job's)."""
    asked = []
    monkeypatch.setattr(load_search, "search_load", lambda *args: asked.append(args[-1]) or "measured")
    (candidate,) = expand_candidates(llm_spec())
    for bisects in (True, False):
        work = Work(candidate, "probe", capacity_first=True, bisect=bisects)
        assert load_search.measure_work(work, None, llm_spec(), [], Path("unused")) == "measured"
    assert asked == [True, False]
