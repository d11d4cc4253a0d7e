"""Cost formulas from docs/design.md, checked against hand-computed answers."""

from __future__ import annotations

import math

import pytest

from recommender.decide.cost import (
    CapacityPlan,
    cost_per_hour,
    cost_per_inference,
    cost_per_million,
    fleet_cost_per_hour,
    initial_instance_count,
    plan_capacity,
)
from recommender.errors import CostError, RecommenderError


@pytest.fixture
def published_plan() -> CapacityPlan:
    # The published plan: 490 invocations/min per ml.g4dn.xlarge (0.7364 USD/h) at a 30,000/min target.
    return plan_capacity("ml.g4dn.xlarge", price_per_hour=0.7364, ipm_per_instance=490, target_ipm=30_000)


def test_published_plan_needs_62_instances(published_plan: CapacityPlan) -> None:
    # 30000 / 490 = 61.22... -> 62
    assert published_plan.fleet_size == 62


def test_published_plan_costs_45_6568_per_hour(published_plan: CapacityPlan) -> None:
    # 62 x 0.7364 = 45.6568, exactly as printed (no 45.656800000000004)
    assert published_plan.cost_per_hour == 45.6568
    assert f"{published_plan.cost_per_hour}" == "45.6568"


def test_published_plan_cost_per_inference(published_plan: CapacityPlan) -> None:
    # at capacity: 45.6568 / (62 x 490 x 60) = 0.7364 / 29400 = 2.50476...e-5 USD; x 1e6 = 25.0476 USD
    assert published_plan.cost_per_inference == pytest.approx(0.7364 / 29_400, rel=1e-12)
    assert published_plan.cost_per_million == pytest.approx(25.047619, abs=1e-6)
    # at the target load: 45.6568 / (30000 x 60) = 2.536489e-5 USD
    assert published_plan.cost_per_inference_at_target == pytest.approx(2.536489e-5, rel=1e-6)
    assert published_plan.utilisation_at_target == pytest.approx(30_000 / 30_380)


@pytest.mark.parametrize(
    ("price", "count", "expected"),
    [(0.7364, 1, 0.7364), (0.7364, 62, 45.6568), (0.204, 3, 0.612), (4.89, 2, 9.78), (0.0, 5, 0.0)],
)
def test_cost_per_hour(price: float, count: int, expected: float) -> None:
    assert cost_per_hour(price, count) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize(
    ("cost_hour", "ipm", "expected"),
    [
        (0.204, 648, 0.204 / 38_880),  # ml.c5.xlarge at 648/min: 5.2469e-6 USD
        (0.7364, 490, 0.7364 / 29_400),
        (60.0, 1, 1.0),  # 60 USD/h, one per minute -> 60 an hour -> 1 USD each
    ],
)
def test_cost_per_inference(cost_hour: float, ipm: float, expected: float) -> None:
    assert cost_per_inference(cost_hour, ipm) == pytest.approx(expected, rel=1e-12)
    assert cost_per_million(cost_hour, ipm) == pytest.approx(expected * 1_000_000, rel=1e-12)


@pytest.mark.parametrize(
    ("target", "per_instance", "expected"),
    [(30_000, 490, 62), (980, 490, 2), (981, 490, 3), (1, 490, 1), (490, 490, 1), (0.3, 0.1, 3), (100, 33.3, 4)],
)
def test_initial_instance_count(target: float, per_instance: float, expected: int) -> None:
    assert initial_instance_count(target, per_instance) == expected


def test_fleet_cost_per_hour_is_price_times_count() -> None:
    # ml.g5.xlarge 1.4084 USD/h, 700/min each, 2,000/min target -> ceil(2.857) = 3 -> 4.2252 USD/h
    assert fleet_cost_per_hour(1.4084, 2_000, 700) == pytest.approx(4.2252, abs=1e-12)


@pytest.mark.parametrize("ipm", [0, -1, -0.5, math.nan, math.inf])
def test_zero_or_negative_throughput_is_a_clear_error(ipm: float) -> None:
    with pytest.raises(CostError, match="invocations per minute") as caught:
        cost_per_inference(1.0, ipm)
    assert caught.value.hint
    with pytest.raises(CostError):
        initial_instance_count(30_000, ipm)


@pytest.mark.parametrize("target", [0, -10])
def test_non_positive_target_is_an_error(target: float) -> None:
    with pytest.raises(CostError, match="target"):
        initial_instance_count(target, 490)


@pytest.mark.parametrize(("price", "count"), [(-0.1, 1), (math.nan, 1), (0.5, 0), (0.5, -2)])
def test_bad_price_or_count_is_an_error(price: float, count: int) -> None:
    with pytest.raises(RecommenderError):
        cost_per_hour(price, count)
