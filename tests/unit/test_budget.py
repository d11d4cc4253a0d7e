"""Budget math: plan estimates, refusal before a run, and the guard that stops a running plan."""

from __future__ import annotations

import pytest

from recommender.decide.budget import BudgetExceeded, BudgetGuard, RunBudget, admits, check_budget, estimate_cost
from recommender.errors import RecommenderError


def test_estimate_multiplies_candidates_duration_instances_and_price() -> None:
    # 12 candidates x (5 min traffic + 10 min overhead) x 2 instances = 6 instance-hours; at $0.736/h = $4.416
    estimate = estimate_cost(
        candidates=12, traffic_seconds=300, endpoint_instance_count=2, price_per_hour=0.736, deploy_overhead_minutes=10
    )
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
    with pytest.raises(BudgetExceeded, match=r"spent \$1.00 of the \$1.00 budget"):
        guard.check()


@pytest.mark.parametrize("kwargs", [{"candidates": -1}, {"endpoint_instance_count": 0}, {"price_per_hour": -1.0}])
def test_estimate_rejects_nonsense(kwargs: dict) -> None:
    args = {"candidates": 1, "traffic_seconds": 60, "endpoint_instance_count": 1, "price_per_hour": 1.0} | kwargs
    with pytest.raises(ValueError):
        estimate_cost(**args)


@pytest.mark.parametrize(
    ("spent", "budget", "estimate", "admitted"),
    [
        (0.0, None, 100.0, True),  # no budget, no limit
        (0.0, 1.0, 1.0, True),  # exactly covered
        (0.5, 1.0, 0.5, True),
        (0.6, 1.0, 0.5, False),  # $0.40 left does not cover $0.50
        (1.0, 1.0, 0.0, False),  # spent: even a free candidate waits for a raised budget
        (1.2, 1.0, 0.1, False),  # overspent by an earlier run's teardown
    ],
)
def test_a_candidate_starts_only_when_what_is_left_covers_its_estimate(spent, budget, estimate, admitted) -> None:
    assert admits(spent, budget, estimate) is admitted


def test_the_guard_counts_earlier_runs_spend() -> None:
    guard = BudgetGuard(budget_usd=1.0, price_per_hour=3.6, spent_before_usd=0.75)
    assert guard.spent_usd == pytest.approx(0.75) and guard.remaining_usd == pytest.approx(0.25)
    assert guard.add(250) is True  # $0.25 more: $1.00 in all
    with pytest.raises(BudgetExceeded, match=r"spent \$1.00 of the \$1.00 budget"):
        guard.check()


def test_run_budget_refuses_a_candidate_the_rest_does_not_cover_and_records_each_billed_block() -> None:
    now, recorded = [0.0], []
    budget = RunBudget(
        BudgetGuard(1.0, 36.0, spent_before_usd=0.5),
        endpoint_instance_count=1,
        clock=lambda: now[0],
        candidate_usd=0.3,
        record=recorded.append,
    )  # $0.01 per second
    assert budget.refusal() is None and not budget.stopped
    with budget.billed():
        now[0] = 30.0  # $0.30
    assert recorded == [pytest.approx(0.3)]
    refusal = budget.refusal()  # $0.20 left, a candidate needs $0.30
    assert refusal == (
        "$0.80 of the $1.00 budget spent, $0.20 left, a candidate is estimated at $0.30; "
        "raise target.budget_usd and run again to measure it"
    )
    assert budget.stopped


def test_run_budget_stopped_by_the_clock_is_marked_stopped_and_records_the_spend() -> None:
    now, recorded = [0.0], []
    budget = RunBudget(BudgetGuard(1.0, 36.0), endpoint_instance_count=2, clock=lambda: now[0], record=recorded.append)
    with pytest.raises(BudgetExceeded), budget.billed():
        now[0] = 50.0  # 2 instances x 50 s at $0.01/s = $1.00
        budget.check()
    assert budget.stopped and recorded == [pytest.approx(1.0)]


def test_without_a_budget_nothing_is_refused_or_recorded() -> None:
    recorded = []
    budget = RunBudget(None, 1, record=recorded.append)
    with budget.billed():
        budget.check()
    assert budget.refusal() is None and recorded == [] and not budget.stopped
