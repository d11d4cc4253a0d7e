"""Stop conditions on synthetic window series with known answers."""

import pytest

from recommender.metrics.limits import Limits
from recommender.metrics.rules import Rules, StopRules, WindowRules
from recommender.metrics.stop_reason import StopKind, StopReason
from recommender.metrics.stopping import ended_early, planned_window_counts, stop_reason
from tests.unit.test_steady import win


def stop_text(*args: object) -> str | None:
    """The reason as stored (its text), or None."""
    reason = stop_reason(*args)
    return reason.text if reason is not None else None


RULES = Rules(Limits("p95", 500, 0.01), WindowRules(stable_windows=3))


def test_latency_stop_needs_three_consecutive_breaches():
    assert stop_text([win(0, 0, 600, 600), win(0, 1, 600, 400), win(0, 2, 600, 700)], {0: 3}, RULES) is None
    reason = stop_text([win(0, 0, 600, 600), win(0, 1, 600, 700), win(0, 2, 600, 650)], {0: 3}, RULES)
    assert reason == "latency: p95 above 500 ms in 3 consecutive windows (600.0, 700.0, 650.0 ms)"


def test_latency_stop_can_be_switched_off():
    windows = [win(0, i, 600, 900) for i in range(3)]
    assert stop_text(windows, {0: 3}, Rules(stop=StopRules(latency=False))) is None


def test_error_rate_over_the_last_windows():
    # 4 failures in 300 requests = 1.33 % > 1 %; 2 in 300 = 0.67 %
    assert (
        stop_text(
            [win(0, 0, 600, 20, errors=0), win(0, 1, 600, 20, errors=2), win(0, 2, 600, 20, errors=2)], {0: 3}, RULES
        )
        == "error rate: 1.3% over the last 3 windows, above the 1.0% limit"
    )
    assert (
        stop_text(
            [win(0, 0, 600, 20, errors=0), win(0, 1, 600, 20, errors=1), win(0, 2, 600, 20, errors=1)], {0: 3}, RULES
        )
        is None
    )


def test_max_invocations_reached():
    rules = Rules(stop=StopRules(max_invocations=1000))
    assert stop_text([win(0, 0, 999, 20)], {0: 3}, rules) is None
    assert (
        stop_text([win(0, 0, 1200, 20)], {0: 3}, rules)
        == "max invocations: a window reached 1200 invocations/min (limit 1000)"
    )


FLAT = Rules(stop=StopRules(flat=True, flat_tolerance=0.05))
STEP_1 = [win(0, 0, 1000, 20, load=2), win(0, 1, 1010, 20, load=2), win(0, 2, 990, 20, load=2)]  # mean 1000


def test_flat_invocations_when_more_users_bring_less_than_5_percent():
    step_2 = [win(1, 0, 1020, 20, load=4), win(1, 1, 1030, 20, load=4), win(1, 2, 1040, 20, load=4)]  # mean 1030: +3 %
    assert stop_text(STEP_1 + step_2, {0: 3, 1: 3}, FLAT) == (
        "flat invocations: 1030/min at load 4 vs 1000/min at 2 (growth below 5%)"
    )


def test_growth_is_not_flat():
    step_2 = [win(1, i, 1100, 20, load=4) for i in range(3)]  # +10 %
    assert stop_text(STEP_1 + step_2, {0: 3, 1: 3}, FLAT) is None


def test_flat_waits_for_enough_windows_and_for_more_load():
    early = [win(1, 0, 1000, 20, load=4), win(1, 1, 1000, 20, load=4)]
    assert stop_text(STEP_1 + early, {0: 3, 1: 3}, FLAT) is None  # 2 of 3 windows so far
    assert stop_text(STEP_1 + early, {0: 3, 1: 2}, FLAT) is not None  # the step only has 2 windows
    same_load = [win(1, i, 1000, 20, load=2) for i in range(3)]
    assert stop_text(STEP_1 + same_load, {0: 3, 1: 3}, FLAT) is None


def test_flat_is_off_by_default():
    flat = [win(1, i, 1000, 20, load=4) for i in range(3)]
    assert stop_text(STEP_1 + flat, {0: 3, 1: 3}, RULES) is None


def test_planned_window_counts():
    assert planned_window_counts([(0, 5, 10), (0, 10, 15), (1, 25, 30)]) == {0: 2, 1: 1}


@pytest.mark.parametrize("windows", [[], [win(0, 0, 600, 20)]])
def test_nothing_to_stop_on(windows):
    assert stop_text(windows, {0: 3}, RULES) is None


def test_the_reason_is_typed_and_its_stored_text_parses_back() -> None:
    reason = stop_reason([win(0, 0, 600, 600), win(0, 1, 600, 700), win(0, 2, 600, 650)], {0: 3}, RULES)
    assert reason is not None and reason.kind is StopKind.LATENCY
    assert StopReason.parse(reason.text) == reason
    assert StopReason.parse("max invocations: x").kind is StopKind.MAX_INVOCATIONS
    other = StopReason.parse("latency threshold")
    assert other.kind is StopKind.OTHER and other.label == "latency threshold" and other.text == "latency threshold"


def test_a_precision_stop_that_took_effect_at_the_plans_end_ended_nothing_early() -> None:
    # 2026-12-07's CI: a level of 15 s known at its 29th half-second window (14.55 s) ended at the next tick, 15.04 s,
    # and was stored as ended early because known; it ran to its end
    known = StopReason(StopKind.PRECISION, "MaxInvocations +-60.2%, p90 +-33.3% over n=26 within +-100%")
    assert ended_early(known, 14.03, 15.0) is known
    assert ended_early(known, 15.04, 15.0) is None
    assert ended_early(known, 15.0, 15.0) is None
    # a limit's stop is kept whenever it came (it ends the plan's higher levels)
    breached = StopReason(StopKind.LATENCY, "p95 above 100 ms in 3 windows")
    assert ended_early(breached, 15.04, 15.0) is breached
    assert ended_early(None, 15.04, 15.0) is None
