"""The `search:` part of the experiment file: grid (every candidate, in full) or adaptive (load search per candidate,
racing across candidates, a seeded Optuna sampler for numeric ranges), with an optional budget.

    search: adaptive                                   # or: grid (the default)
    search: {strategy: adaptive, budget: {candidates: 12}, seed: 7, racing: {eta: 3}}

Numeric ranges (`variants.instance_group_counts: {range: [1, 8]}`) are accepted only under adaptive search.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from recommender.spec.base import Strict

UnimodalAxis = Literal["instance_group_counts", "max_batch_sizes"]
UNIMODAL_AXES: tuple[UnimodalAxis, ...] = ("instance_group_counts", "max_batch_sizes")


class IntRange(Strict):
    """A numeric axis given as an inclusive range, searched by the sampler (adaptive search only)."""

    range: tuple[int, int] = Field(..., description="Lowest and highest value, both included, e.g. [1, 8].")
    log: bool = Field(False, description="Sample on a log scale (for wide ranges such as max batch sizes 1..64).")

    @model_validator(mode="after")
    def _ordered(self) -> IntRange:
        low, high = self.range
        if low > high:
            raise ValueError(f"range [{low}, {high}]: the first value must not be above the second")
        if self.log and low < 1:
            raise ValueError(f"range [{low}, {high}] with log: true needs values >= 1")
        return self

    def values(self) -> list[int]:
        low, high = self.range
        return list(range(low, high + 1))

    def __str__(self) -> str:
        low, high = self.range
        return f"{low}..{high}" + (" (log)" if self.log else "")


class Budget(Strict):
    """How much adaptive search may spend: candidates tried and/or wall-clock minutes (whichever ends first)."""

    candidates: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Most candidates measured (by the sampler, or "
        "from the grid in order); the rest are recorded as not measured, with the reason.",
    )
    minutes: float | None = Field(None, gt=0, description="No new candidate starts after this many minutes of search.")


class Racing(Strict):
    """Across candidates: probe each briefly (a load search, 1 short repeat per tried level); then, best probe first,
    measure in full only a candidate whose probe could still contain the best (search/racing.py: the incumbent rule,
    capped by successive halving); the others stop with status `pruned`, figures and reason kept."""

    final_repeats: int = Field(
        3,
        ge=2,
        le=20,
        description="Repeats at the found load level for the candidates "
        "measured in full (3 or more give intervals over repeats; at least 2, so a full "
        "measurement is never mistaken for a probe).",
    )
    probe_seconds: float | None = Field(
        None,
        gt=0,
        description="Length of each load level the probe tries (1 repeat); "
        "default: warm-up + 1 window (a probe's figure is a point either way), never longer than the traffic "
        "plan's level.",
    )
    margin: float = Field(
        0.1,
        ge=0,
        le=1,
        description="The brief intervals rest on window-to-window noise only; each "
        "upper bound is widened by this share before a candidate is judged out of the race.",
    )
    eta: int = Field(
        3,
        ge=2,
        le=10,
        description="Successive halving: at most ceil(n / eta) candidates are measured in "
        "full, plus any later one whose probe separates above every one measured in full (its MaxInvocations, "
        "narrowed by `margin`, above each one's upper bound).",
    )


class SearchSpec(Strict):
    """How candidates are chosen and how much each is measured."""

    strategy: Literal["grid", "adaptive"] = Field(
        "grid",
        description="grid: every candidate, the full traffic plan; adaptive: load search, racing, sampler for ranges.",
    )
    budget: Budget = Field(default_factory=Budget, description="Adaptive only: candidates and/or minutes.")
    seed: int = Field(0, ge=0, description="Seed of the sampler (same seed, same candidates proposed).")
    racing: Racing = Field(default_factory=Racing, description="Adaptive only: racing across candidates.")
    knee_tolerance: float = Field(
        0.05,
        ge=0,
        le=1,
        description="Adaptive load search: a level whose mean IPM grows "
        "less than this share over the previous meeting level is the knee (search stops).",
    )

    unimodal: list[UnimodalAxis] = Field(
        default_factory=lambda: list(UNIMODAL_AXES),
        description="Adaptive only: axes along which throughput rises to one peak and then falls; a candidate past a "
        "clear fall on such an axis (two probes falling by more than the racing margin) is pruned without being "
        "probed (search/structure.py). [] turns this rule off (a candidate that is the same server as a probed "
        "one, differing only in max batch size without dynamic batching, is still not deployed again).",
    )

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, value: Any) -> Any:
        return {"strategy": value} if isinstance(value, str) else value

    @property
    def adaptive(self) -> bool:
        return self.strategy == "adaptive"
