"""Ranking: constraints with reasons, importance weights, Pareto front, noise-level ties, determinism."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest

from recommender.decide.comparison import TIED_TEXT
from recommender.decide.ranking import (
    IMPORTANCE_WEIGHTS,
    Importance,
    RankInput,
    rank,
)
from recommender.errors import RankingError
from recommender.metrics.limits import Limits

OPEN = Limits("p99", math.inf, 1.0)  # no limit binds here; latencies labelled p99


def candidate(name: str, cost_m: float | None, latency: float | None, ipm: float | None, **extra) -> RankInput:
    return RankInput(
        key=f"k-{name}",
        name=name,
        cost_per_million=cost_m,
        model_latency_ms=latency,
        invocations_per_minute=ipm,
        instance_type="ml.g4dn.xlarge",
        **extra,
    )


@pytest.fixture
def trio() -> list[RankInput]:
    # ratio to best (1 = best): cost A 10/10, B 10/20, C 10/30; latency A 20/50, B 1, C 20/40;
    # throughput A 1000/2000, B 1, C 1500/2000
    return [candidate("A", 10, 50, 1000), candidate("B", 20, 20, 2000), candidate("C", 30, 40, 1500)]


def names(ranking) -> list[str]:
    return [r.candidate.name for r in ranking.ranked]


def test_importance_levels_map_linearly_to_weights() -> None:
    assert IMPORTANCE_WEIGHTS == {"lowest": 0, "low": 1, "medium": 2, "high": 3, "highest": 4}
    # the default: SageMaker Inference Recommender's decision, the lowest cost per inference within the limits
    assert Importance().weights() == pytest.approx({"cost": 1.0, "latency": 0.0, "throughput": 0.0})
    assert Importance("medium", "medium", "medium").weights() == pytest.approx(
        {"cost": 1 / 3, "latency": 1 / 3, "throughput": 1 / 3}
    )
    assert Importance("highest", "low", "lowest").weights() == pytest.approx(
        {"cost": 0.8, "latency": 0.2, "throughput": 0.0}
    )
    # all 'lowest' = no preference = equal weights
    assert Importance("lowest", "lowest", "lowest").weights() == pytest.approx(
        {"cost": 1 / 3, "latency": 1 / 3, "throughput": 1 / 3}
    )


@pytest.mark.parametrize(
    ("importance", "order", "scores"),
    [
        # equal weights: A (1 + .4 + .5)/3, B (.5 + 1 + 1)/3, C (1/3 + .5 + .75)/3
        (Importance("medium", "medium", "medium"), ["B", "A", "C"], [2.5 / 3, 1.9 / 3, (1 / 3 + 1.25) / 3]),
        # cost only (the default)
        (Importance(), ["A", "B", "C"], [1.0, 0.5, 1 / 3]),
        # .8 cost + .2 latency: A .8 + .08, B .4 + .2, C .8/3 + .1
        (Importance("highest", "low", "lowest"), ["A", "B", "C"], [0.88, 0.6, 0.8 / 3 + 0.1]),
        # cost 1, latency 4, throughput 2 (sum 7): B (.5 + 4 + 2)/7, C (1/3 + 2 + 1.5)/7, A (1 + 1.6 + 1)/7
        (Importance("low", "highest", "medium"), ["B", "C", "A"], [6.5 / 7, (1 / 3 + 3.5) / 7, 3.6 / 7]),
    ],
)
def test_weighted_scores(trio: list[RankInput], importance: Importance, order: list[str], scores: list[float]) -> None:
    ranking = rank(trio, OPEN, importance=importance)
    assert names(ranking) == order
    assert [r.score for r in ranking.ranked] == pytest.approx(scores)
    assert [r.rank for r in ranking.ranked] == [1, 2, 3]


def test_pareto_front(trio: list[RankInput]) -> None:
    # B beats C on all three; A (cheapest) and B (fastest, most throughput) are not dominated
    pareto = {r.candidate.name: r.pareto for r in rank(trio, OPEN).ranked}
    assert pareto == {"A": True, "B": True, "C": False}


def with_intervals(item: RankInput, spread: float = 0.01, **extra) -> RankInput:
    """The candidate with +-`spread` intervals around its throughput and latency (3 repeats)."""
    ipm, latency = item.invocations_per_minute, item.model_latency_ms
    return dataclasses.replace(
        item,
        ipm_interval=(ipm * (1 - spread), ipm * (1 + spread)),
        repeats=3,
        latency_interval=(latency * (1 - spread), latency * (1 + spread)),
        **extra,
    )


def test_comparison_against_the_winner_is_relative_to_the_other(trio: list[RankInput]) -> None:
    equal = Importance("medium", "medium", "medium")
    by_name = {r.candidate.name: r for r in rank([with_intervals(c) for c in trio], OPEN, equal).ranked}
    assert by_name["B"].comparison == "recommended"
    # B vs C: cost 20 vs 30 -> 33.3 % lower; latency 20 vs 40 -> 50.0 % lower; 2000 vs 1500 -> 33.3 % higher
    assert by_name["C"].comparison == (
        "winner has 33.3% lower cost per million, 50.0% lower p99 latency, 33.3% higher throughput"
    )


def test_without_intervals_no_difference_is_claimed(trio: list[RankInput]) -> None:
    by_name = {r.candidate.name: r for r in rank(trio, OPEN).ranked}
    assert by_name["C"].comparison == "no noise estimate (repeats: 1): no difference claimed"
    assert not by_name["C"].tied_with_winner


def test_a_difference_is_claimed_only_where_the_intervals_separate() -> None:
    winner = candidate("w", 20, 20, 2000, ipm_interval=(1900, 2100), latency_interval=(18, 22), repeats=3)
    close = candidate("c", 21, 30, 1950, ipm_interval=(1850, 2050), latency_interval=(28, 32), repeats=3)
    windows = with_intervals(candidate("n", 40, 40, 1000), window_noise=True)
    by_name = {r.candidate.name: r.comparison for r in rank([winner, close, windows], OPEN).ranked}
    # throughput (and so cost) overlap: tied on them; latency 20 vs 30 apart: 33.3 % lower
    assert (
        by_name["c"] == "winner has 33.3% lower p99 latency; tied on cost per million, throughput (intervals overlap)"
    )
    assert by_name["n"] == (
        "winner has 50.0% lower cost per million, 50.0% lower p99 latency, 100.0% higher "
        "throughput (window-to-window noise only)"
    )


def test_every_exclusion_reason_is_given() -> None:
    bad = RankInput(
        key="k-bad",
        name="bad",
        status="failed",
        reason="model failed to load: CUDA out of memory",
        invocations_per_minute=0,
        model_latency_ms=250,
        error_rate=0.2,
    )
    slow = candidate("slow", 10, 120, 900)
    skipped = RankInput(key="k-skip", name="trt", status="skipped", reason="TensorRT needs a GPU")
    constraints = Limits("p95", 100, 0.01)
    ranking = rank([bad, slow, skipped, candidate("ok", 10, 50, 1000)], constraints)

    assert names(ranking) == ["ok"]
    reasons = {e.candidate.name: e.reasons for e in ranking.excluded}
    assert reasons["bad"] == (
        "failed: model failed to load: CUDA out of memory",
        "no successful invocations were measured",
        "p95 latency 250 ms is above the 100 ms threshold",
        "error rate 20.00% is above the 1.00% limit",
    )
    assert reasons["slow"] == ("p95 latency 120 ms is above the 100 ms threshold",)
    assert reasons["trt"] == (
        "skipped: TensorRT needs a GPU",
        "no successful invocations were measured",
        "no p95 latency was measured",
    )


def test_latency_exactly_at_threshold_is_allowed() -> None:
    ranking = rank([candidate("edge", 10, 100, 1000)], Limits("p99", 100, 0.0))
    assert names(ranking) == ["edge"] and not ranking.excluded


def test_overlapping_intervals_are_tied_and_get_no_percentage_claim() -> None:
    winner = candidate("winner", 20, 20, 2000, ipm_interval=(1900, 2100), latency_interval=(18, 22))
    twin = candidate("twin", 20.5, 21, 1950, ipm_interval=(1850, 2050), latency_interval=(19, 23))
    # throughput overlaps but latency does not: distinguishable
    quick_not = candidate("latency-apart", 20.5, 30, 1950, ipm_interval=(1850, 2050), latency_interval=(28, 32))
    ranking = rank([twin, quick_not, winner], OPEN)
    by_name = {r.candidate.name: r for r in ranking.ranked}

    assert ranking.winner.candidate.name == "winner"
    assert by_name["twin"].tied_with_winner and by_name["twin"].comparison == TIED_TEXT
    assert "%" not in by_name["twin"].comparison
    assert not by_name["latency-apart"].tied_with_winner
    assert "%" in by_name["latency-apart"].comparison
    assert [r.candidate.name for r in ranking.tied] == ["twin"]


def test_point_values_without_intervals_are_not_tied_unless_equal() -> None:
    ranking = rank([candidate("a", 10, 20, 1000), candidate("b", 10, 20.5, 1000)], OPEN)
    assert not ranking.ranked[1].tied_with_winner


def test_identical_candidates_order_by_name_whatever_the_input_order() -> None:
    items = [candidate(n, 10, 20, 1000) for n in ("gamma", "alpha", "beta")]
    orders = {tuple(names(rank(list(p), OPEN))) for p in itertools.permutations(items)}
    assert orders == {("alpha", "beta", "gamma")}
    # all equal: every normalised value is 1, so every score is 1
    assert [r.score for r in rank(items, OPEN).ranked] == [1.0, 1.0, 1.0]


def test_cost_per_million_is_derived_from_cost_per_hour() -> None:
    item = RankInput(key="k", name="g4dn", invocations_per_minute=490, model_latency_ms=30, cost_per_hour=0.7364)
    # 0.7364 / (490 x 60) x 1e6 = 25.0476 USD per million
    assert rank([item], OPEN).ranked[0].cost_per_million == pytest.approx(25.047619, abs=1e-6)


def test_missing_price_drops_cost_from_the_score_with_a_note() -> None:
    ranking = rank([candidate("priced", 10, 30, 1000), candidate("local", None, 20, 1000)], OPEN)
    assert ranking.weights == pytest.approx({"cost": 0.0, "latency": 0.5, "throughput": 0.5})
    assert any("cost left out" in note for note in ranking.notes)
    assert names(ranking) == ["local", "priced"]


def test_no_eligible_candidates_gives_no_winner() -> None:
    ranking = rank([RankInput(key="k", name="x", status="failed", reason="crashed")], OPEN)
    assert ranking.winner is None and len(ranking.excluded) == 1


def test_unknown_importance_level_is_an_error() -> None:
    with pytest.raises(RankingError, match="very high") as caught:
        rank([], OPEN, importance=Importance(cost="very high"))
    assert "lowest, low, medium, high, highest" in caught.value.hint


def test_inverted_interval_is_an_error() -> None:
    with pytest.raises(RankingError, match="ipm_interval"):
        rank([candidate("x", 1, 1, 100, ipm_interval=(110, 90))], OPEN)


def test_unpriced_but_shared_instance_type_is_ranked_on_relative_cost() -> None:
    """The issue's 12-candidate BERT, its two contenders, unpriced on one instance type: cost is not unknown, it is
    proportional to 1 / MaxInvocations; with the default weights the cheaper-per-inference one wins, labelled so."""
    limits = Limits("p95", 100, 0.01)
    fast_single = candidate("pt-nodb-ig1-mbs1", None, 40, 4030)
    batched = candidate("pt-nodb-ig2-mbs8", None, 67, 7527)
    ranking = rank([fast_single, batched], limits)
    assert ranking.winner is not None and ranking.winner.candidate.name == "pt-nodb-ig2-mbs8"
    assert ranking.cost_basis == "relative" and ranking.weights["cost"] > 0
    assert ranking.notes[0].startswith("cost ranked on relative cost")
    assert all(r.cost_per_million is None for r in ranking.ranked)  # no USD figure is invented
    (cost,) = [m for m in ranking.ranked[1].versus.metrics if m.label.startswith("cost per million")]
    assert cost.label == "cost per million (relative: instance-hours)"
    other = RankInput(key="k-o", name="other", model_latency_ms=67, invocations_per_minute=7527, instance_type="c5")
    mixed = rank([fast_single, other], limits)
    assert mixed.cost_basis == "none" and mixed.weights["cost"] == 0  # two instance types, prices unknown: unknown
