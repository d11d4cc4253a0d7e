"""Traffic shapes as pure functions of the clock (SageMaker `phases` semantics).

A phase starts at `initial_users` and adds `spawn_rate / 60` users per second for
`duration_seconds`; phases run one after another. The load generator asks `users_at`
on every tick, so the user count follows the clock instead of a blocking ramp.
Every shape of the spec (phases, stairs, concurrency, rate, trace) compiles to a `TrafficPlan` of such
levels (`compile_traffic`); the open-loop shapes add an arrival schedule: `rate` one of constant, Poisson or gamma
gaps, `trace` the replay of a trace file's timestamps (files/trace.py).
No Locust import here: the parent process uses these functions too.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from recommender.files.trace import read_trace

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
    arrival: str | None = None  # None: closed loop; constant | poisson | gamma | trace: open loop
    seed: int = 0
    cv: float | None = None  # gamma: the coefficient of variation of the gaps
    trace: str | None = None  # trace: the trace file (absolute), replayed at `speedup`
    speedup: float = 1.0
    trace_format: str = "seconds"  # trace: seconds | mooncake (files/trace.py)

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

    def with_levels(self, levels: tuple[PlanLevel, ...]) -> TrafficPlan:
        """The same arrivals over other levels (one level of the plan run on its own)."""
        return replace(self, levels=levels)

    def schedule(self) -> np.ndarray:
        """Scheduled send times (s from the start), ascending; empty for closed loop."""
        return self.sends()[0]

    def sends(self) -> tuple[np.ndarray, np.ndarray | None]:
        """Scheduled send times (s from the start, ascending) and the payload index of each send (None: the
        payload's requests in turn); no sends for closed loop. A trace is read from its file here (in the load child
        too: the plan carries its path, not its rows)."""
        if self.arrival is None:  # closed loop
            return np.empty(0), None
        if self.arrival == "trace":
            assert self.trace is not None  # compile_traffic sets it for a trace
            trace = read_trace(self.trace, format=self.trace_format)
            return trace.replay_times(self.speedup), trace.indices
        times = arrival_schedule(
            [
                (start, end, level.rate)
                for level, (start, end) in zip(self.levels, self.windows(), strict=False)
                if level.rate is not None  # every level of an open-loop plan has its rate
            ],
            self.arrival,
            self.seed,
            self.cv,
        )
        return times, None

    def to_json(self) -> str:
        return json.dumps({"levels": [asdict(level) for level in self.levels]} | _open_loop_fields(self))

    @classmethod
    def from_json(cls, text: str) -> TrafficPlan:
        data = json.loads(text)
        levels = tuple(PlanLevel(**level) for level in data.pop("levels"))
        return cls(levels, **data)


def _open_loop_fields(plan: TrafficPlan) -> dict[str, object]:
    fields: dict[str, object] = {"arrival": plan.arrival, "seed": plan.seed}
    if plan.cv is not None:
        fields["cv"] = plan.cv
    if plan.trace is not None:
        fields |= {"trace": plan.trace, "speedup": plan.speedup}
    if plan.trace_format != "seconds":
        fields["trace_format"] = plan.trace_format
    return fields


def compile_traffic(traffic: TrafficSpec) -> TrafficPlan:
    """The spec's traffic shape (phases, stairs, concurrency, rate or trace) as a plan of levels; a trace is one level
    at its mean rate, as long as its replay (files/trace.py `Trace.duration`)."""
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
        return TrafficPlan(levels, r.arrival, r.seed, r.cv)
    if traffic.trace is not None:
        tr, trace = traffic.trace, read_trace(traffic.trace.file, format=traffic.trace.format)
        duration = trace.duration(tr.speedup)
        level = PlanLevel(tr.max_concurrency, 0, duration, len(trace) / duration)
        # absolute: the load child runs in its own folder
        return TrafficPlan(
            (level,), "trace", trace=str(Path(tr.file).resolve()), speedup=tr.speedup, trace_format=tr.format
        )
    assert traffic.phases is not None  # TrafficSpec fills in the default phase when no shape is given
    return TrafficPlan(tuple(PlanLevel(p.initial_users, p.spawn_rate, p.duration_seconds) for p in traffic.phases))


def traffic_seconds(traffic: TrafficSpec) -> float:
    """Seconds of load one candidate gets: the plan's duration times `repeats` (the one place this is computed); under
    `until_known` the most it gets, so budgets and estimates stay upper bounds."""
    return compile_traffic(traffic).duration * traffic.repeats


def arrival_schedule(
    levels: Sequence[tuple[float, float, float]], arrival: str, seed: int = 0, cv: float | None = None
) -> np.ndarray:
    """Send times for (start, end, rate) levels: evenly spaced (constant), exponential gaps (poisson, seeded) or gamma
    gaps of mean 1 / rate and coefficient of variation `cv` (gamma, seeded: shape 1 / cv^2; cv 1 is Poisson's, above
    1 burstier, below 1 more regular)."""
    rng = np.random.default_rng(seed)
    parts = []
    for start, end, rate in levels:
        if arrival == "constant":
            parts.append(start + np.arange(math.floor((end - start) * rate + _EPSILON)) / rate)
        elif arrival == "poisson":
            gaps = rng.exponential(1.0 / rate, size=int((end - start) * rate * 2 + 50))
            times = start + np.cumsum(gaps)
            parts.append(times[times < end])
        elif arrival == "gamma" and cv is not None:
            parts.append(_gamma_times(rng, cv, start, end, rate))
        else:
            raise ValueError(f"unknown arrival {arrival!r} (constant, poisson, or gamma with its cv)")
    return np.concatenate(parts) if parts else np.empty(0)


def _gamma_times(rng: np.random.Generator, cv: float, start: float, end: float, rate: float) -> np.ndarray:
    """Send times from `start` by gamma gaps (mean 1 / rate, coefficient of variation cv) until `end`, drawn in
    blocks until they reach it: bursty gaps can fall short of twice the mean count."""
    shape = 1.0 / cv**2
    block = int((end - start) * rate * 2 + 50)
    times = start + np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), size=block))
    while times[-1] < end:
        times = np.concatenate([times, times[-1] + np.cumsum(rng.gamma(shape, 1.0 / (rate * shape), size=block))])
    return times[times < end]
