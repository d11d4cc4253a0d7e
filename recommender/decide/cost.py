"""Cost arithmetic as docs/design.md "Definitions" defines it. Pure functions; prices from `recommender.decide.prices`.

CostPerHour          = instance price per hour x instance count
CostPerInference     = CostPerHour / (MaxInvocations x 60)      (MaxInvocations is per minute)
CostPerMillionTokens = CostPerHour / (tokens per second x 3600) x 1,000,000   (generative: output or total tokens)
InitialInstanceCount = ceil(target IPM / MaxInvocations per instance)
    sized on the lower bound of the MaxInvocations interval when there is one (`sizing_ipm`), the point estimate's
    count kept beside it (`fleet_size_at_point`)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from recommender.errors import CostError

MINUTES_PER_HOUR = 60
SECONDS_PER_HOUR = 3600
PER_MILLION = 1_000_000


def _positive(name: str, value: float, hint: str) -> float:
    if not isinstance(value, (int, float)) or math.isnan(value) or math.isinf(value) or value <= 0:
        raise CostError(f"{name} must be a positive finite number, got {value!r}", hint=hint)
    return value


def _price(price_per_hour: float) -> float:
    if not isinstance(price_per_hour, (int, float)) or not math.isfinite(price_per_hour) or price_per_hour < 0:
        raise CostError(
            f"price per hour must be a finite number >= 0, got {price_per_hour!r}",
            hint="pass the on-demand USD price per instance-hour, e.g. --price 0.7364",
        )
    return price_per_hour


_THROUGHPUT_HINT = (
    "a candidate with no successful invocations has no cost per inference; "
    "check that its benchmark ran and met its latency and error limits"
)


def cost_per_hour(price_per_hour: float, instance_count: int = 1) -> float:
    """USD per hour for `instance_count` instances at `price_per_hour` each."""
    if not isinstance(instance_count, int) or instance_count < 1:
        raise CostError(f"instance count must be a whole number >= 1, got {instance_count!r}")
    # Decimal on the price as written (0.7364) keeps 62 x 0.7364 at 45.6568, not 45.656800000000004.
    return float(Decimal(repr(_price(price_per_hour))) * instance_count)


def cost_per_inference(cost_per_hour_usd: float, max_invocations_per_minute: float) -> float:
    """USD per successful inference when the capacity bought for `cost_per_hour_usd` runs at MaxInvocations."""
    ipm = _positive("invocations per minute", max_invocations_per_minute, _THROUGHPUT_HINT)
    return _price(cost_per_hour_usd) / (ipm * MINUTES_PER_HOUR)


def cost_per_million(cost_per_hour_usd: float, max_invocations_per_minute: float) -> float:
    """USD per million successful inferences (CostPerInference x 1,000,000)."""
    return cost_per_inference(cost_per_hour_usd, max_invocations_per_minute) * PER_MILLION


def cost_per_million_tokens_at(cost_per_hour_usd: float | None, tokens_per_second: float | None) -> float | None:
    """USD per million tokens when the capacity bought for `cost_per_hour_usd` streams `tokens_per_second` (a
    generative candidate's output tokens/s, or output + input for total tokens); None when either is unknown."""
    if cost_per_hour_usd is None or not tokens_per_second or tokens_per_second <= 0:
        return None
    return _price(cost_per_hour_usd) / (tokens_per_second * SECONDS_PER_HOUR) * PER_MILLION


def initial_instance_count(target_ipm: float, ipm_per_instance: float) -> int:
    """ceil(target IPM / MaxInvocations per instance), computed on exact fractions (no float round-up)."""
    target = _positive("target invocations per minute", target_ipm, "give the peak load you must serve, e.g. 30000")
    per_instance = _positive("invocations per minute per instance", ipm_per_instance, _THROUGHPUT_HINT)
    return math.ceil(Fraction(target) / Fraction(per_instance))


def fleet_cost_per_hour(price_per_hour: float, target_ipm: float, ipm_per_instance: float) -> float:
    """USD per hour of the smallest fleet that serves `target_ipm`."""
    return cost_per_hour(price_per_hour, initial_instance_count(target_ipm, ipm_per_instance))


@dataclass(frozen=True)
class CapacityPlan:
    """How many instances serve a target load, and what that costs.

    `cost_per_inference` follows docs/design.md (capacity at MaxInvocations); `cost_per_inference_at_target`
    is what each inference costs when the fleet serves exactly the target load (it includes the slack
    of the last, partly used instance).
    """

    instance_type: str
    price_per_hour: float
    ipm_per_instance: float
    target_ipm: float
    fleet_size: int  # InitialInstanceCount
    cost_per_hour: float
    cost_per_inference: float
    cost_per_million: float
    cost_per_inference_at_target: float
    utilisation_at_target: float
    currency: str = "USD"
    sizing_ipm: float | None = None  # what the count was sized on (the interval's lower bound); None: the point
    fleet_size_at_point: int | None = None  # the count at the point estimate MaxInvocations

    def to_dict(self) -> dict[str, Any]:
        """Plain data; the fleet size under SageMaker's word, `instance_count` (the --json key)."""
        return {("instance_count" if name == "fleet_size" else name): value for name, value in asdict(self).items()}


def plan_capacity(
    instance_type: str,
    price_per_hour: float,
    ipm_per_instance: float,
    target_ipm: float,
    sizing_ipm: float | None = None,
) -> CapacityPlan:
    """Combine the formulas for one instance type: count (sized on `sizing_ipm`, the interval's lower bound, when
    given), fleet cost, cost per inference and per million (at MaxInvocations, the point estimate)."""
    sized = sizing_ipm if sizing_ipm is not None and sizing_ipm != ipm_per_instance else None
    count = initial_instance_count(target_ipm, sized or ipm_per_instance)
    fleet = cost_per_hour(price_per_hour, count)
    return CapacityPlan(
        instance_type=instance_type,
        price_per_hour=price_per_hour,
        ipm_per_instance=ipm_per_instance,
        target_ipm=target_ipm,
        fleet_size=count,
        cost_per_hour=fleet,
        cost_per_inference=cost_per_inference(fleet, ipm_per_instance * count),
        cost_per_million=cost_per_million(fleet, ipm_per_instance * count),
        cost_per_inference_at_target=cost_per_inference(fleet, target_ipm),
        utilisation_at_target=target_ipm / (ipm_per_instance * count),
        sizing_ipm=sized,
        fleet_size_at_point=initial_instance_count(target_ipm, ipm_per_instance),
    )
