"""Budget math: plan estimates, refusal before a run, and the guard that stops a running plan."""

from __future__ import annotations

import pytest

from recommender.decide.budget import BudgetExceeded, BudgetGuard, check_budget, estimate_cost
from recommender.errors import RecommenderError


def test_estimate_multiplies_candidates_duration_instances_and_price() -> None:
    # 12 candidates x (5 min traffic + 10 min overhead) x 2 instances = 6 instance-hours; at $0.736/h = $4.416
    estimate = estimate_cost(candidates=12, traffic_seconds=300, endpoint_instance_count=2, price_per_hour=0.736,
                             deploy_overhead_minutes=10)
    assert estimate.minutes_per_candidate == pytest.approx(15)
    assert estimate.instance_hours == pytest.approx(6.0)
    assert estimate.usd == pytest.approx(4.416)


@pytest.mark.parametrize(("budget", "refused"), [(None, False), (5.0, False), (4.416, False), (4.0, True)])
def test_check_budget_refuses_only_above_the_budget(budget: float | None, refused: bool) -> None:
    estimate = estimate_cost(12, 300, 2, 0.736, deploy_overhead_minutes=10)
    if refused:
        with pytest.raises(BudgetExceeded) as caught:
            check_budget(estimate, budget)
        assert isinstance(caught.value, RecommenderError)
        assert "$4.42" in caught.value.message
        assert "about 10 candidate(s)" in caught.value.hint  # $0.368 per candidate -> 10 fit in $4
    else:
        check_budget(estimate, budget)


def test_guard_reports_exhaustion_when_spend_reaches_budget() -> None:
    guard = BudgetGuard(budget_usd=1.0, price_per_hour=3.6)  # $0.001 per instance-second
    assert guard.add(500) is False
    assert guard.remaining_usd == pytest.approx(0.5)
    guard.check()
    assert guard.add(500) is True
    with pytest.raises(BudgetExceeded, match="spent \\$1.00 of the \\$1.00 budget"):
        guard.check()


@pytest.mark.parametrize("kwargs", [{"candidates": -1}, {"endpoint_instance_count": 0}, {"price_per_hour": -1.0}])
def test_estimate_rejects_nonsense(kwargs: dict) -> None:
    args = {"candidates": 1, "traffic_seconds": 60, "endpoint_instance_count": 1, "price_per_hour": 1.0} | kwargs
    with pytest.raises(ValueError):
        estimate_cost(**args)
