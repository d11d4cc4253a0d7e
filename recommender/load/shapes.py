"""Traffic shapes as pure functions of the clock (SageMaker `phases` semantics).

A phase starts at `initial_users` and adds `spawn_rate / 60` users per second for
`duration_seconds`; phases run one after another. The load generator asks `users_at`
on every tick, so the user count follows the clock instead of a blocking ramp.
No Locust import here: the parent process uses these functions too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

# Absorbs float error in spawn_rate * elapsed / 60 (e.g. 0.1 * 30 / 60 = 0.04999...).
_EPSILON = 1e-9


class PhaseLike(Protocol):
    """What a shape needs from a phase; `recommender.spec.Phase` satisfies it."""

    initial_users: int
    spawn_rate: float  # users added per minute
    duration_seconds: float


def phase_windows(phases: Sequence[PhaseLike]) -> list[tuple[float, float]]:
    """The (start, end) seconds of every phase, measured from the start of the test."""
    windows = []
    start = 0.0
    for phase in phases:
        end = start + phase.duration_seconds
        windows.append((start, end))
        start = end
    return windows


def total_duration(phases: Sequence[PhaseLike]) -> float:
    """Seconds from the start of the first phase to the end of the last."""
    return sum(phase.duration_seconds for phase in phases)


def phase_at(phases: Sequence[PhaseLike], t_seconds: float) -> int | None:
    """Index of the phase running at `t_seconds` (a boundary belongs to the later phase); None once all are over."""
    if t_seconds < 0:
        raise ValueError(f"t_seconds must be >= 0, got {t_seconds}")
    for index, (start, end) in enumerate(phase_windows(phases)):
        if start <= t_seconds < end:
            return index
    return None


def users_at(phases: Sequence[PhaseLike], t_seconds: float) -> int | None:
    """Users that should be active at `t_seconds` after the start; None once all phases are over."""
    index = phase_at(phases, t_seconds)
    if index is None:
        return None
    phase = phases[index]
    elapsed = t_seconds - phase_windows(phases)[index][0]
    added = math.floor(phase.spawn_rate * elapsed / 60.0 + _EPSILON)
    return phase.initial_users + added
