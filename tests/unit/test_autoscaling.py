"""Autoscaling settings, and the request bodies checked offline against botocore's service model."""

from __future__ import annotations

import boto3
import botocore.session
import pytest
from botocore.stub import Stubber
from botocore.validate import ParamValidator

from recommender.decide.autoscaling import ScalingPlan, plan_scaling, target_value
from recommender.errors import CostError


@pytest.fixture(scope="module")
def autoscaling_model():
    return botocore.session.get_session().get_service_model("application-autoscaling")


@pytest.fixture
def plan() -> ScalingPlan:
    # 490/min per instance measured, peak 30,000/min, trough 3,000/min, default headroom 0.5
    return plan_scaling("bert-endpoint", 490, 30_000, trough_ipm=3_000)


@pytest.mark.parametrize(
    ("max_ipm", "headroom", "expected"), [(490, 0.5, 245.0), (490, 0.7, 343.0), (1000, 1.0, 1000.0), (648, 0.5, 324.0)]
)
def test_target_value_is_max_invocations_times_headroom(max_ipm: float, headroom: float, expected: float) -> None:
    assert target_value(max_ipm, headroom) == expected


def test_capacities(plan: ScalingPlan) -> None:
    # target 245/min per instance; trough 3000/245 = 12.24 -> 13; peak 30000/245 = 122.4 -> 123
    assert plan.target_value == 245.0
    assert (plan.min_capacity, plan.max_capacity) == (13, 123)


def test_min_capacity_defaults_to_one_instance() -> None:
    plan = plan_scaling("ep", 490, 30_000, headroom=0.7)
    # 30000 / 343 = 87.46 -> 88
    assert (plan.min_capacity, plan.max_capacity) == (1, 88)


def test_max_never_below_min() -> None:
    plan = plan_scaling("ep", 490, 100, min_instances=2)
    assert (plan.min_capacity, plan.max_capacity) == (2, 2)


def test_register_scalable_target_body(plan: ScalingPlan) -> None:
    assert plan.register_scalable_target_request() == {
        "ServiceNamespace": "sagemaker",
        "ResourceId": "endpoint/bert-endpoint/variant/AllTraffic",
        "ScalableDimension": "sagemaker:variant:DesiredInstanceCount",
        "MinCapacity": 13,
        "MaxCapacity": 123,
    }


def test_put_scaling_policy_body(plan: ScalingPlan) -> None:
    body = plan.put_scaling_policy_request()
    assert body["PolicyType"] == "TargetTrackingScaling"
    assert body["ResourceId"] == "endpoint/bert-endpoint/variant/AllTraffic"
    assert body["TargetTrackingScalingPolicyConfiguration"] == {
        "TargetValue": 245.0,
        "PredefinedMetricSpecification": {"PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"},
        "ScaleInCooldown": 300,
        "ScaleOutCooldown": 300,
    }


@pytest.mark.parametrize(
    ("operation", "body_of"),
    [
        ("RegisterScalableTarget", ScalingPlan.register_scalable_target_request),
        ("PutScalingPolicy", ScalingPlan.put_scaling_policy_request),
    ],
)
def test_bodies_pass_botocore_validation(autoscaling_model, plan: ScalingPlan, operation: str, body_of) -> None:
    shape = autoscaling_model.operation_model(operation).input_shape
    report = ParamValidator().validate(body_of(plan), shape)
    assert not report.has_errors(), report.generate_report()


def test_enum_values_are_in_the_service_model(autoscaling_model, plan: ScalingPlan) -> None:
    # ParamValidator does not check enums; check them against the model here.
    shape = autoscaling_model.operation_model("PutScalingPolicy").input_shape
    body = plan.put_scaling_policy_request()
    config = shape.members["TargetTrackingScalingPolicyConfiguration"]
    metric_type = config.members["PredefinedMetricSpecification"].members["PredefinedMetricType"]
    assert body["ServiceNamespace"] in shape.members["ServiceNamespace"].enum
    assert body["ScalableDimension"] in shape.members["ScalableDimension"].enum
    assert body["PolicyType"] in shape.members["PolicyType"].enum
    assert "SageMakerVariantInvocationsPerInstance" in metric_type.enum


def test_bodies_are_accepted_by_a_boto3_client(plan: ScalingPlan) -> None:
    """A real application-autoscaling client with a botocore Stubber standing in for AWS (unreachable here)."""
    client = boto3.client(
        "application-autoscaling", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x"
    )
    with Stubber(client) as stubber:
        stubber.add_response("register_scalable_target", {}, plan.register_scalable_target_request())
        stubber.add_response(
            "put_scaling_policy",
            {
                "PolicyARN": "arn:aws:autoscaling:us-east-1:123456789012:"
                "scalingPolicy:x:resource/sagemaker/y:policyName/z"
            },
            plan.put_scaling_policy_request(),
        )
        client.register_scalable_target(**plan.register_scalable_target_request())
        client.put_scaling_policy(**plan.put_scaling_policy_request())
        stubber.assert_no_pending_responses()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"max_invocations_per_instance": 0}, "MaxInvocations"),
        ({"max_invocations_per_instance": -5}, "MaxInvocations"),
        ({"headroom": 0}, "headroom"),
        ({"headroom": 1.5}, "headroom"),
        ({"peak_ipm": 0}, "peak"),
        ({"trough_ipm": 40_000}, "trough"),
        ({"endpoint_name": "bad_name!"}, "endpoint name"),
        ({"variant_name": "-x"}, "variant name"),
        ({"min_instances": 0}, "min instances"),
    ],
)
def test_impossible_inputs_are_clear_errors(kwargs: dict, message: str) -> None:
    args = {"endpoint_name": "ep", "max_invocations_per_instance": 490, "peak_ipm": 30_000, **kwargs}
    endpoint, max_ipm, peak = args.pop("endpoint_name"), args.pop("max_invocations_per_instance"), args.pop("peak_ipm")
    with pytest.raises(CostError, match=message):
        plan_scaling(endpoint, max_ipm, peak, **args)
