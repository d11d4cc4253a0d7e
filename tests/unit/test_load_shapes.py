"""Unit tests for the clock-driven traffic shapes (SageMaker phase semantics)."""

from __future__ import annotations

import pytest

from recommender.load.shapes import phase_at, phase_windows, total_duration, users_at
from recommender.spec import Phase


@pytest.fixture
def three_phases() -> list[Phase]:
    return [
        Phase(initial_users=1, spawn_rate=60, duration_seconds=10),  # +1 user/s
        Phase(initial_users=5, spawn_rate=0, duration_seconds=5),  # flat
        Phase(initial_users=2, spawn_rate=30, duration_seconds=20),  # +1 user every 2 s
    ]


def test_windows_are_consecutive(three_phases: list[Phase]) -> None:
    assert phase_windows(three_phases) == [(0.0, 10.0), (10.0, 15.0), (15.0, 35.0)]


def test_total_duration(three_phases: list[Phase]) -> None:
    assert total_duration(three_phases) == 35.0


@pytest.mark.parametrize(
    ("t", "expected"),
    [
        (0.0, 1),
        (0.99, 1),
        (1.0, 2),
        (9.999, 10),
        (10.0, 5),  # a boundary belongs to the next phase, which restarts at its initial_users
        (14.9, 5),
        (15.0, 2),
        (16.9, 2),
        (17.0, 3),
        (34.9, 11),
        (35.0, None),  # all phases over
        (1000.0, None),
    ],
)
def test_users_at_known_answers(three_phases: list[Phase], t: float, expected: int | None) -> None:
    assert users_at(three_phases, t) == expected


@pytest.mark.parametrize(
    ("t", "expected"),
    [(0.0, 0), (9.99, 0), (10.0, 1), (15.0, 2), (34.99, 2), (35.0, None)],
)
def test_phase_at(three_phases: list[Phase], t: float, expected: int | None) -> None:
    assert phase_at(three_phases, t) == expected


@pytest.mark.parametrize(
    ("spawn_rate", "t", "expected"),
    [
        (6, 9.99, 1),  # 0.1 user/s: the first extra user arrives at 10 s
        (6, 10.0, 2),
        (0.1 * 600, 0.3, 1),  # float spawn rate, exact multiple
        (120, 2.5, 6),  # 2 users/s
        (1, 59.9, 1),
        (1, 60.0, 2),
    ],
)
def test_spawn_rate_is_per_minute(spawn_rate: float, t: float, expected: int) -> None:
    phases = [Phase(initial_users=1, spawn_rate=spawn_rate, duration_seconds=120)]
    assert users_at(phases, t) == expected


def test_float_error_does_not_lose_a_user() -> None:
    phases = [Phase(initial_users=1, spawn_rate=0.1 * 3, duration_seconds=1000)]  # 0.30000000000000004 / min
    assert users_at(phases, 200.0) == 2


def test_negative_time_is_rejected(three_phases: list[Phase]) -> None:
    with pytest.raises(ValueError, match="t_seconds"):
        users_at(three_phases, -0.1)
