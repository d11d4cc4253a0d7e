"""What a measurement runs under: how windows are cut and judged, when the load stops, and the limits at measure time.

    Rules(limits, windows: WindowRules, stop: StopRules)   # plain data: the load child gets it as JSON

Window rules (warm-up, window length, stability, late sends) hold for the measurement and for every later decision
on its windows. Stop rules are the load child's stop conditions (SageMaker StoppingConditions, metrics/stopping.py);
its latency and error conditions use `limits`, the experiment file's limits when it was measured. A decision taken
later uses its own limits (metrics/limits.py) with the same window rules.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from recommender.metrics.limits import Limits

if TYPE_CHECKING:
    from recommender.spec import ExperimentSpec


@dataclass(frozen=True)
class WindowRules:
    """How steady-state windows are cut (warm-up, length) and judged (stability rule, late sends)."""

    warmup_s: float = 5.0
    window_s: float = 5.0
    stable_windows: int = 4
    stability_tolerance: float = 0.05
    late_ms: float = 1.0
    max_late_share: float = 0.01

    @classmethod
    def from_spec(cls, spec: ExperimentSpec) -> WindowRules:
        t, open_loop = spec.traffic, spec.traffic.open_loop
        return cls(
            t.warmup_seconds,
            t.window_seconds,
            t.stability.windows,
            t.stability.tolerance,
            open_loop.late_ms if open_loop else 1.0,
            open_loop.max_late_share if open_loop else 0.01,
        )


@dataclass(frozen=True)
class StopRules:
    """Which stop conditions the load child checks at the end of every window (metrics/stopping.py)."""

    latency: bool = True
    errors: bool = True
    max_invocations: float | None = None
    flat: bool = False
    flat_tolerance: float = 0.05
    known_within: float | None = None  # measure until known: a level ends at this relative half-width
    known_min_windows: int = 4  # the fewest windows a level is judged on
    from_top: bool = False  # levels from the highest down, stopping at the first that meets the limits

    @classmethod
    def from_spec(cls, spec: ExperimentSpec) -> StopRules:
        stop, known = spec.traffic.stopping, spec.traffic.known
        return cls(
            stop.latency,
            stop.error_rate,
            stop.max_invocations,
            stop.flat_invocations,
            stop.flat_tolerance,
            known.relative_half_width if known else None,
            known.min_windows if known else 4,
            known.from_top if known else False,
        )

    @property
    def on_limits(self) -> bool:
        """The latency or the error condition is on: the measurement may have stopped at the limits."""
        return self.latency or self.errors


@dataclass(frozen=True)
class Rules:
    """A measurement's rules: the limits it was measured with, its window rules and its stop rules."""

    limits: Limits = field(default_factory=Limits)
    windows: WindowRules = field(default_factory=WindowRules)
    stop: StopRules = field(default_factory=StopRules)

    @classmethod
    def from_spec(cls, spec: ExperimentSpec) -> Rules:
        return cls(Limits.from_spec(spec), WindowRules.from_spec(spec), StopRules.from_spec(spec))

    @property
    def stop_limits(self) -> Limits | None:
        """The limits the stop conditions judge by (None when neither the latency nor the error condition is on)."""
        return self.limits if self.stop.on_limits else None

    @property
    def first_look(self) -> int:
        """The first window a level may end on for precision (measure until known): `until_known.min_windows`, and
        never before the `stability.windows` the stability rule needs, so a level known early is never then judged
        "too few windows" (the stability rule bounds the stopping rule)."""
        return max(self.stop.known_min_windows, self.windows.stable_windows)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Rules:
        data = json.loads(text)
        return cls(
            Limits.from_dict(data["limits"]) or Limits(), WindowRules(**data["windows"]), StopRules(**data["stop"])
        )
