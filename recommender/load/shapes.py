"""Traffic shapes as pure functions of the clock (SageMaker `phases` semantics).

A phase starts at `initial_users` and adds `spawn_rate / 60` users per second for
`duration_seconds`; phases run one after another. The load generator asks `users_at`
on every tick, so the user count follows the clock instead of a blocking ramp.
Every shape of the spec (phases, stairs, concurrency, rate) compiles to a `TrafficPlan` of such
levels (`compile_traffic`); the open-loop `rate` shape adds an arrival schedule.
No Locust import here: the parent process uses these functions too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Protocol

import numpy as np

if TYPE_CHECKING:
    from recommender.spec import TrafficSpec

# Absorbs float error in spawn_rate * elapsed / 60 (e.g. 0.1 * 30 / 60 = 0.04999...).
_EPSILON = 1e-9


class PhaseLike(Protocol):
    """What a shape needs from a phase; `recommender.spec.Phase` satisfies it."""

    @property
    def initial_users(self) -> int: ...

    @property
    def spawn_rate(self) -> float: ...  # users added per minute

    @property
    def duration_seconds(self) -> float: ...


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


# --- every traffic shape compiles to a TrafficPlan ------------------------------------------------------------


@dataclass(frozen=True)
class PlanLevel:
    """One phase of a compiled plan; satisfies PhaseLike. `rate` is the open-loop arrival rate (None: closed loop)."""

    initial_users: int
    spawn_rate: float
    duration_seconds: float
    rate: float | None = None

    @property
    def load(self) -> float:
        """The offered load this level ends at: users (closed loop) or requests per second (open loop)."""
        if self.rate is not None:
            return self.rate
        return self.initial_users + math.floor(self.spawn_rate * self.duration_seconds / 60.0 + _EPSILON)


@dataclass(frozen=True)
class TrafficPlan:
    """What the generator runs: levels one after another; open loop adds an arrival schedule."""

    levels: tuple[PlanLevel, ...]
    arrival: str | None = None  # None: closed loop; constant | poisson: open loop
    seed: int = 0

    @property
    def open_loop(self) -> bool:
        return self.arrival is not None

    @property
    def duration(self) -> float:
        return total_duration(self.levels)

    def windows(self) -> list[tuple[float, float]]:
        return phase_windows(self.levels)

    def users_at(self, t_seconds: float) -> int | None:
        """Closed loop: users at t; open loop: the sender pool size while the schedule runs."""
        return users_at(self.levels, t_seconds)

    def schedule(self) -> np.ndarray:
        """Scheduled send times (s from the start), ascending; empty for closed loop."""
        if self.arrival is None:  # closed loop
            return np.empty(0)
        return arrival_schedule(
            [
                (start, end, level.rate)
                for level, (start, end) in zip(self.levels, self.windows(), strict=False)
                if level.rate is not None  # every level of an open-loop plan has its rate
            ],
            self.arrival,
            self.seed,
        )

    def to_json(self) -> str:
        return json.dumps(
            {"levels": [asdict(level) for level in self.levels], "arrival": self.arrival, "seed": self.seed}
        )

    @classmethod
    def from_json(cls, text: str) -> TrafficPlan:
        data = json.loads(text)
        return cls(tuple(PlanLevel(**level) for level in data["levels"]), data["arrival"], data["seed"])


def compile_traffic(traffic: TrafficSpec) -> TrafficPlan:
    """The spec's traffic shape (phases, stairs, concurrency or rate) as a plan of levels."""
    if traffic.stairs is not None:
        s = traffic.stairs
        return TrafficPlan(
            tuple(PlanLevel(s.users_per_step * k, 0, s.duration_seconds) for k in range(1, s.number_of_steps + 1))
        )
    if traffic.concurrency is not None:
        c = traffic.concurrency
        return TrafficPlan(tuple(PlanLevel(users, 0, c.duration_seconds) for users in c.users))
    if traffic.rate is not None:
        r = traffic.rate
        levels = tuple(PlanLevel(r.max_concurrency, 0, r.duration_seconds, rate) for rate in r.rates)
        return TrafficPlan(levels, r.arrival, r.seed)
    assert traffic.phases is not None  # TrafficSpec fills in the default phase when no shape is given
    return TrafficPlan(tuple(PlanLevel(p.initial_users, p.spawn_rate, p.duration_seconds) for p in traffic.phases))


def traffic_seconds(traffic: TrafficSpec) -> float:
    """Seconds of load one candidate gets: the plan's duration times `repeats` (the one place this is computed); under
    `until_known` the most it gets, so budgets and estimates stay upper bounds."""
    return compile_traffic(traffic).duration * traffic.repeats


def arrival_schedule(levels: Sequence[tuple[float, float, float]], arrival: str, seed: int = 0) -> np.ndarray:
    """Send times for (start, end, rate) levels: evenly spaced (constant) or exponential gaps (poisson, seeded)."""
    rng = np.random.default_rng(seed)
    parts = []
    for start, end, rate in levels:
        if arrival == "constant":
            parts.append(start + np.arange(math.floor((end - start) * rate + _EPSILON)) / rate)
        elif arrival == "poisson":
            gaps = rng.exponential(1.0 / rate, size=int((end - start) * rate * 2 + 50))
            times = start + np.cumsum(gaps)
            parts.append(times[times < end])
        else:
            raise ValueError(f"unknown arrival {arrival!r} (constant or poisson)")
    return np.concatenate(parts) if parts else np.empty(0)
