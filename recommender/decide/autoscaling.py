"""Autoscaling settings for a SageMaker endpoint variant, from a measured MaxInvocations per instance.

Target tracking on the predefined metric `SageMakerVariantInvocationsPerInstance` (invocations per
instance per minute). Its TargetValue follows AWS's load-testing guidance for SageMaker endpoints
("Load testing your auto scaling configuration", SageMaker Developer Guide):

    SageMakerVariantInvocationsPerInstance = (MAX_RPS x SAFETY_FACTOR) x 60

where AWS recommends starting tests with SAFETY_FACTOR 0.5. Our MaxInvocations is already per
minute, so TargetValue = MaxInvocations x headroom, headroom defaulting to 0.5. Cooldowns default to
300 s, Application Auto Scaling's default for SageMaker endpoint variants.

The output is the exact request bodies of Application Auto Scaling's RegisterScalableTarget and
PutScalingPolicy (boto3: `register_scalable_target(**body)`, `put_scaling_policy(**body)`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from recommender.errors import CostError

DEFAULT_HEADROOM = 0.5
DEFAULT_COOLDOWN_S = 300
PREDEFINED_METRIC = "SageMakerVariantInvocationsPerInstance"
SERVICE_NAMESPACE = "sagemaker"
SCALABLE_DIMENSION = "sagemaker:variant:DesiredInstanceCount"
# SageMaker EndpointName / VariantName pattern.
_NAME = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}$")


@dataclass(frozen=True)
class ScalingPlan:
    """Capacity bounds and the target-tracking target for one endpoint variant."""

    endpoint_name: str
    variant_name: str
    max_invocations_per_instance: float
    peak_ipm: float
    headroom: float
    target_value: float
    min_capacity: int
    max_capacity: int
    scale_in_cooldown_s: int = DEFAULT_COOLDOWN_S
    scale_out_cooldown_s: int = DEFAULT_COOLDOWN_S

    @property
    def resource_id(self) -> str:
        return f"endpoint/{self.endpoint_name}/variant/{self.variant_name}"

    @property
    def policy_name(self) -> str:
        return f"{self.endpoint_name}-{self.variant_name}-invocations-target"

    def register_scalable_target_request(self) -> dict[str, Any]:
        """The RegisterScalableTarget request body."""
        return {
            "ServiceNamespace": SERVICE_NAMESPACE,
            "ResourceId": self.resource_id,
            "ScalableDimension": SCALABLE_DIMENSION,
            "MinCapacity": self.min_capacity,
            "MaxCapacity": self.max_capacity,
        }

    def put_scaling_policy_request(self) -> dict[str, Any]:
        """The PutScalingPolicy request body (target tracking on invocations per instance)."""
        return {
            "PolicyName": self.policy_name,
            "ServiceNamespace": SERVICE_NAMESPACE,
            "ResourceId": self.resource_id,
            "ScalableDimension": SCALABLE_DIMENSION,
            "PolicyType": "TargetTrackingScaling",
            "TargetTrackingScalingPolicyConfiguration": {
                "TargetValue": self.target_value,
                "PredefinedMetricSpecification": {"PredefinedMetricType": PREDEFINED_METRIC},
                "ScaleInCooldown": self.scale_in_cooldown_s,
                "ScaleOutCooldown": self.scale_out_cooldown_s,
            },
        }


def target_value(max_invocations_per_instance: float, headroom: float = DEFAULT_HEADROOM) -> float:
    """TargetValue for SageMakerVariantInvocationsPerInstance: MaxInvocations per instance x headroom."""
    _require(
        max_invocations_per_instance > 0,
        f"MaxInvocations per instance must be > 0, got {max_invocations_per_instance!r}",
        "a candidate with no sustained invocations cannot be autoscaled on invocations",
    )
    _require(
        0 < headroom <= 1,
        f"headroom must be in (0, 1], got {headroom!r}",
        "it is the fraction of MaxInvocations each instance is asked to carry; AWS suggests starting at 0.5",
    )
    return float(Decimal(repr(float(max_invocations_per_instance))) * Decimal(repr(float(headroom))))


def plan_scaling(
    endpoint_name: str,
    max_invocations_per_instance: float,
    peak_ipm: float,
    *,
    variant_name: str = "AllTraffic",
    headroom: float = DEFAULT_HEADROOM,
    trough_ipm: float = 0.0,
    min_instances: int = 1,
    scale_in_cooldown_s: int = DEFAULT_COOLDOWN_S,
    scale_out_cooldown_s: int = DEFAULT_COOLDOWN_S,
) -> ScalingPlan:
    """Min capacity covers the trough load at the target, max capacity the peak load at the target."""
    for label, name in (("endpoint", endpoint_name), ("variant", variant_name)):
        _require(
            bool(_NAME.match(name)),
            f"{label} name {name!r} is not a valid SageMaker name",
            "use 1-63 letters, digits and hyphens, starting with a letter or digit",
        )
    _require(peak_ipm > 0, f"peak invocations per minute must be > 0, got {peak_ipm!r}", "give the peak load to serve")
    _require(
        0 <= trough_ipm <= peak_ipm, f"trough load {trough_ipm!r} must lie between 0 and the peak {peak_ipm!r}", None
    )
    _require(
        isinstance(min_instances, int) and min_instances >= 1,
        f"min instances must be >= 1, got {min_instances!r}",
        "a real-time endpoint variant keeps at least one instance",
    )
    target = target_value(max_invocations_per_instance, headroom)
    min_capacity = max(min_instances, _instances_for(trough_ipm, target))
    max_capacity = max(min_capacity, _instances_for(peak_ipm, target))
    return ScalingPlan(
        endpoint_name=endpoint_name,
        variant_name=variant_name,
        max_invocations_per_instance=max_invocations_per_instance,
        peak_ipm=peak_ipm,
        headroom=headroom,
        target_value=target,
        min_capacity=min_capacity,
        max_capacity=max_capacity,
        scale_in_cooldown_s=scale_in_cooldown_s,
        scale_out_cooldown_s=scale_out_cooldown_s,
    )


def _instances_for(load_ipm: float, per_instance_ipm: float) -> int:
    return math.ceil(Fraction(load_ipm) / Fraction(per_instance_ipm))


def _require(condition: bool, message: str, hint: str | None) -> None:
    if not condition:
        raise CostError(message, hint=hint)
