"""What a cloud plan will cost before it runs, and a guard that stops it when the spend reaches the budget.

The budget caps an experiment's cumulative spend: what earlier runs spent (kept by the store) counts, and a
candidate starts only when what is left covers its estimate. Pure functions and one small accumulator; prices
are USD per instance-hour.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from recommender.errors import RecommenderError
from recommender.load.shapes import traffic_seconds

DEFAULT_DEPLOY_OVERHEAD_MINUTES = 10.0  # SageMaker endpoint creation plus deletion, billed while instances exist


class BudgetExceeded(RecommenderError):
    """The estimated or spent cost of a run is above the budget the user set."""


@dataclass(frozen=True)
class CostEstimate:
    """The instance time and money a plan needs: every candidate deployed, loaded, then torn down."""

    candidates: int
    minutes_per_candidate: float  # traffic duration plus deploy overhead
    endpoint_instance_count: int  # instances behind each candidate's endpoint
    price_per_hour: float
    instance_hours: float
    usd: float


def estimate_cost(
    candidates: int,
    traffic_seconds: float,
    endpoint_instance_count: int,
    price_per_hour: float,
    deploy_overhead_minutes: float = DEFAULT_DEPLOY_OVERHEAD_MINUTES,
) -> CostEstimate:
    """candidates x (traffic + deploy overhead) x endpoint instance count x price."""
    instances = endpoint_instance_count
    if candidates < 0 or traffic_seconds < 0 or instances < 1 or price_per_hour < 0 or deploy_overhead_minutes < 0:
        raise ValueError("candidates, durations and price must be >= 0 and endpoint_instance_count >= 1")
    minutes = traffic_seconds / 60 + deploy_overhead_minutes
    instance_hours = candidates * minutes / 60 * instances
    return CostEstimate(candidates, minutes, instances, price_per_hour, instance_hours, instance_hours * price_per_hour)


def check_budget(estimate: CostEstimate, budget_usd: float | None) -> None:
    """Raise BudgetExceeded when the estimate is above the budget; no budget (None) means no limit."""
    if budget_usd is None or estimate.usd <= budget_usd:
        return
    per_candidate = estimate.usd / estimate.candidates if estimate.candidates else 0.0
    affordable = int(budget_usd // per_candidate) if per_candidate else 0
    raise BudgetExceeded(
        f"estimated cost ${estimate.usd:.2f} ({estimate.instance_hours:.2f} instance-hours for {estimate.candidates} "
        f"candidates x {estimate.minutes_per_candidate:.1f} min x {estimate.endpoint_instance_count} instance(s) at "
        f"${estimate.price_per_hour:.4f}/h) is above the budget of ${budget_usd:.2f}",
        hint=f"The budget covers about {affordable} candidate(s): shrink the variant grid or the traffic phases, "
        "or raise the budget.",
    )


def admits(spent_usd: float, budget_usd: float | None, estimate_usd: float) -> bool:
    """Whether a candidate estimated at `estimate_usd` may start: no budget, or the budget is not spent and what is
    left covers the estimate."""
    return budget_usd is None or (spent_usd < budget_usd and budget_usd - spent_usd >= estimate_usd)


class BudgetGuard:
    """Accumulates billed instance-seconds on top of earlier runs' spend; `exhausted` turns true once the total
    reaches the budget."""

    def __init__(self, budget_usd: float, price_per_hour: float, spent_before_usd: float = 0.0) -> None:
        if budget_usd < 0 or price_per_hour < 0 or spent_before_usd < 0:
            raise ValueError("budget, price and spend must be >= 0")
        self.budget_usd = budget_usd
        self.price_per_hour = price_per_hour
        self.spent_before_usd = spent_before_usd
        self.instance_seconds = 0.0
        self.other_usd = 0.0  # billed at other prices (the other targets of a multi-target experiment)

    def add_usd(self, usd: float) -> bool:
        """Record billed money directly (a block at its own price); returns `exhausted`."""
        if usd < 0:
            raise ValueError("usd must be >= 0")
        self.other_usd += usd
        return self.exhausted

    def add(self, instance_seconds: float) -> bool:
        """Record billed instance time (seconds x instances); returns `exhausted`."""
        if instance_seconds < 0:
            raise ValueError("instance_seconds must be >= 0")
        self.instance_seconds += instance_seconds
        return self.exhausted

    @property
    def spent_usd(self) -> float:
        return self.spent_before_usd + self.other_usd + self.instance_seconds / 3600 * self.price_per_hour

    @property
    def remaining_usd(self) -> float:
        return max(0.0, self.budget_usd - self.spent_usd)

    @property
    def exhausted(self) -> bool:
        return self.spent_usd >= self.budget_usd

    def check(self) -> None:
        """Raise BudgetExceeded once the budget is spent, so the caller stops and tears down."""
        if self.exhausted:
            raise BudgetExceeded(
                f"spent ${self.spent_usd:.2f} of the ${self.budget_usd:.2f} budget; stopping the run",
                hint="Every endpoint is torn down; raise the budget or shrink the plan and run again to resume.",
            )


LOCAL_DEPLOY_OVERHEAD_MINUTES = 0.5  # a server start on this host (for the duration estimate; not billed)


def target_price(target: Any) -> float:
    """USD per instance-hour of an experiment's target: price_per_hour, else the catalog price of
    priced_as (or of instance_type for sagemaker), else 0 (unpriced)."""
    if target.price_per_hour:
        return target.price_per_hour
    catalog_type = target.priced_as or (target.instance_type if target.kind == "sagemaker" else None)
    if catalog_type is None:
        return 0.0
    from recommender.decide.prices import find_price

    return find_price(catalog_type, target.region)[0].usd_per_hour


def estimate_plan(spec: Any, candidates: int, target: Any = None) -> CostEstimate:
    """Duration and money for running `candidates` candidates of an experiment on one target (default: its first)."""
    target = target if target is not None else spec.target
    traffic_s = traffic_seconds(spec.traffic)
    overhead = DEFAULT_DEPLOY_OVERHEAD_MINUTES if target.kind == "sagemaker" else LOCAL_DEPLOY_OVERHEAD_MINUTES
    if target.kind == "remote":
        overhead = 0.0
    count = target.endpoint_instance_count if target.kind == "sagemaker" else 1
    return estimate_cost(candidates, traffic_s, count, target_price(target), overhead)


def total_estimate(estimates: list[CostEstimate]) -> CostEstimate:
    """Several targets' estimates as one (minutes and price are averages weighted by candidates and instance-hours)."""
    candidates = sum(e.candidates for e in estimates)
    hours, usd = sum(e.instance_hours for e in estimates), sum(e.usd for e in estimates)
    minutes = sum(e.minutes_per_candidate * e.candidates for e in estimates) / candidates if candidates else 0.0
    instances = max((e.endpoint_instance_count for e in estimates), default=1)
    return CostEstimate(candidates, minutes, instances, usd / hours if hours else 0.0, hours, usd)


def experiment_budget(spec: Any) -> float | None:
    """The cap on an experiment's total spend: the smallest `budget_usd` any of its targets gives (None: no cap)."""
    budgets = [t.budget_usd for t in spec.all_targets if t.budget_usd is not None]
    return min(budgets) if budgets else None


@dataclass
class _Block:
    """One billed deployment (deploy to teardown) and what it cost so far."""

    since: float
    instances: int
    usd_per_hour: float
    usd: float = 0.0


class RunBudget:
    """A run's spend against its budget, by the clock: instance time is billed from deploy until teardown ends.

    Safe across concurrent candidates (one lock): every open billed block counts, and `admit(usd)` lets a candidate
    start only when what is left, less what the candidates already running may still spend of their estimates, covers
    its estimate. `refusal()` says why the next candidate may not start (without holding anything back); `check()`
    (called while load runs) raises BudgetExceeded once the spend reaches the budget, so the caller leaves its
    `with deployment` block and the endpoint is torn down. `record` receives the USD each billed block cost (the
    caller stores it); `stopped` tells whether either happened.
    """

    def __init__(
        self,
        guard: BudgetGuard | None,
        endpoint_instance_count: int,
        clock: Callable[[], float] = time.monotonic,
        candidate_usd: float = 0.0,
        record: Callable[[float], None] | None = None,
    ) -> None:
        self.guard, self.endpoint_instance_count, self.clock = guard, endpoint_instance_count, clock
        self.candidate_usd, self.record = candidate_usd, record
        self.stopped = False
        self._lock = threading.RLock()
        self._blocks: dict[int, _Block] = {}  # by thread: one deployment billed per thread at a time
        self._reserved: dict[int, list[float]] = {}  # by thread: [estimate, billed against it so far]

    @classmethod
    def for_spec(
        cls,
        spec: Any,
        candidates: int | Mapping[int, int],
        spent_usd: float = 0.0,
        record: Callable[[float], None] | None = None,
    ) -> RunBudget:
        """Refuse (BudgetExceeded) when the plan's estimate is above the experiment's budget; else a guard for the run
        that counts `spent_usd` (earlier runs) against it. `candidates`: a count on the first target, or counts by
        target index (spec.all_targets)."""
        budget = experiment_budget(spec)
        if budget is None:
            return cls(None, 1)
        counts = candidates if isinstance(candidates, Mapping) else {0: candidates}
        estimate = total_estimate([estimate_plan(spec, n, spec.all_targets[i]) for i, n in counts.items()])
        check_budget(estimate, budget)
        first = estimate_plan(spec, 1)
        return cls(
            BudgetGuard(budget, first.price_per_hour, spent_usd),
            first.endpoint_instance_count,
            candidate_usd=first.usd,
            record=record,
        )

    def refusal(self, candidate_usd: float | None = None) -> str | None:
        """Why a candidate estimated at `candidate_usd` (default: the first target's) may not start, or None."""
        with self._lock:
            return self._refusal(self.candidate_usd if candidate_usd is None else candidate_usd)

    def admit(self, candidate_usd: float) -> str | None:
        """Like `refusal`, and an admitted candidate's estimate is held back from what is left (for this thread) until
        `release`: concurrent candidates never start on the same dollars."""
        with self._lock:
            refusal = self._refusal(candidate_usd)
            if refusal is None:
                self._reserved[threading.get_ident()] = [candidate_usd, 0.0]
            return refusal

    def release(self) -> None:
        """This thread's candidate is done: its estimate no longer holds anything back."""
        with self._lock:
            self._reserved.pop(threading.get_ident(), None)

    def _refusal(self, candidate_usd: float) -> str | None:
        guard = self.guard
        if guard is None:
            return None
        self._bring_up_to_date()
        held = sum(max(0.0, estimate - billed) for estimate, billed in self._reserved.values())
        if admits(guard.spent_usd + held, guard.budget_usd, candidate_usd):
            return None
        self.stopped = True
        running = f" (${held:.2f} held for running candidates)" if held else ""
        return (
            f"${guard.spent_usd:.2f} of the ${guard.budget_usd:.2f} budget spent, "
            f"${guard.remaining_usd:.2f} left{running}, "
            f"a candidate is estimated at ${candidate_usd:.2f}; raise target.budget_usd and run again to measure it"
        )

    @contextlib.contextmanager
    def billed(self, usd_per_hour: float | None = None, instances: int | None = None) -> Iterator[None]:
        """Bill instance time while the block runs (wrap the deployment's `with`, so teardown is billed too), at
        `usd_per_hour` x `instances` (default: the first target's)."""
        price = self.guard.price_per_hour if usd_per_hour is None and self.guard is not None else (usd_per_hour or 0.0)
        block = _Block(self.clock(), instances or self.endpoint_instance_count, price)
        with self._lock:
            self._blocks[threading.get_ident()] = block
        try:
            yield
        finally:
            with self._lock:
                self._bring_up_to_date()
                del self._blocks[threading.get_ident()]
            if self.guard is not None and self.record is not None:
                self.record(block.usd)

    def check(self) -> None:
        """Bring the spend of every open block up to now; raise BudgetExceeded once it reaches the budget."""
        with self._lock:
            self._bring_up_to_date()
            if self.guard is not None and self.guard.exhausted:
                self.stopped = True
                self.guard.check()

    def _bring_up_to_date(self) -> None:
        if self.guard is None:
            return
        now = self.clock()
        for thread, block in self._blocks.items():
            usd = (now - block.since) * block.instances / 3600 * block.usd_per_hour
            block.since, block.usd = now, block.usd + usd
            self.guard.add_usd(usd)
            if thread in self._reserved:
                self._reserved[thread][1] += usd
