"""Unit tests for the clock-driven traffic shapes (SageMaker phase semantics)."""

from __future__ import annotations

import math

import numpy as np
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


# --- compiled shapes -----------------------------------------------------------------------------------------

from recommender.errors import SpecError  # noqa: E402
from recommender.load.shapes import arrival_schedule, compile_traffic  # noqa: E402
from recommender.spec import ExperimentSpec, TrafficSpec, load_spec  # noqa: E402


def test_stairs_compile_to_growing_flat_levels() -> None:
    plan = compile_traffic(TrafficSpec(stairs={"users_per_step": 2, "number_of_steps": 3, "duration_seconds": 4}))
    assert plan.windows() == [(0, 4), (4, 8), (8, 12)]
    assert [plan.users_at(t) for t in (0, 3.9, 4, 8, 11.9)] == [2, 2, 4, 6, 6] and plan.users_at(12) is None
    assert [level.load for level in plan.levels] == [2, 4, 6] and not plan.open_loop


def test_concurrency_levels_in_order() -> None:
    plan = compile_traffic(TrafficSpec(concurrency={"users": [1, 8, 4], "duration_seconds": 5}))
    assert [plan.users_at(t) for t in (0, 5, 10)] == [1, 8, 4] and plan.duration == 15


def test_phases_are_the_default_shape() -> None:
    traffic = TrafficSpec()
    assert traffic.shape == "phases" and compile_traffic(traffic).users_at(59.9) == 1


def test_rate_compiles_to_a_schedule_and_a_sender_pool() -> None:
    plan = compile_traffic(
        TrafficSpec(rate={"requests_per_second": [2, 4], "duration_seconds": 2, "max_concurrency": 8})
    )
    assert plan.open_loop and plan.users_at(3.5) == 8 and [level.load for level in plan.levels] == [2, 4]
    assert plan.schedule().tolist() == [0, 0.5, 1, 1.5, 2, 2.25, 2.5, 2.75, 3, 3.25, 3.5, 3.75]


def test_poisson_schedule_is_seeded_and_keeps_its_rate() -> None:
    first = arrival_schedule([(0, 100, 50)], "poisson", seed=7)
    assert np.array_equal(first, arrival_schedule([(0, 100, 50)], "poisson", seed=7))
    assert not np.array_equal(first, arrival_schedule([(0, 100, 50)], "poisson", seed=8))
    assert abs(len(first) - 5000) < 5 * math.sqrt(5000)  # Poisson count: mean 5000, sd 71
    assert np.all(np.diff(first) > 0) and first[-1] < 100


def test_plan_round_trips_through_json() -> None:
    plan = compile_traffic(
        TrafficSpec(rate={"requests_per_second": 3, "arrival": "poisson", "seed": 4, "duration_seconds": 1})
    )
    assert type(plan).from_json(plan.to_json()) == plan


def test_only_one_shape_is_allowed(tmp_path) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        "name: t\ntraffic:\n  stairs: {users_per_step: 1, number_of_steps: 2, duration_seconds: 5}\n"
        "  concurrency: {users: [1], duration_seconds: 5}\n"
    )
    with pytest.raises(SpecError) as error:
        load_spec(path)
    assert any("give only one traffic shape, not stairs and concurrency" in p for p in error.value.problems)


def test_misspelt_shape_key_gets_a_suggestion(tmp_path) -> None:
    path = tmp_path / "typo.yaml"
    path.write_text("name: t\ntraffic:\n  rate: {requests_per_secnd: 5, duration_seconds: 5}\n")
    with pytest.raises(SpecError) as error:
        load_spec(path)
    assert any(
        "traffic.rate.requests_per_secnd: unknown key (did you mean `requests_per_second`?)" in p
        for p in error.value.problems
    )


def test_every_traffic_field_is_described() -> None:
    from recommender.spec import Concurrency, Rate, StabilityRule, Stairs, Stopping

    for model in (TrafficSpec, Stairs, Concurrency, Rate, StabilityRule, Stopping):
        assert all(field.description for field in model.model_fields.values()), model.__name__
    assert ExperimentSpec.model_validate({"name": "t"}).traffic.repeats == 1
