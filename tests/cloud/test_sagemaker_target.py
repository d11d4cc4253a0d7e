"""The sagemaker target against a real moto server process: deploy, tags, teardown, metrics, cleanup."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.targets.aws import TAG_EXPERIMENT, TAG_RUN_ID
from recommender.targets.sagemaker import SageMakerTarget, cleanup
from recommender.targets.sagemaker_endpoint import cloudwatch_metrics
from tests.fixtures_text import python_backend_repository

pytestmark = pytest.mark.cloud

BUCKET = "recommender-artifacts-test"
# Shape of a SageMaker Triton image URI (account and tag here are placeholders for the emulator).
# moto 5.2.1 validates InstanceType against an old enum (no ml.g5 / ml.c6i), hence g4dn and c5 below.
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/sagemaker-tritonserver:24.09-py3"
TRUST = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
    '"Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
)


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    return python_backend_repository(tmp_path / "repo", "minilm")


@pytest.fixture
def target(aws) -> SageMakerTarget:
    aws.client("s3").create_bucket(Bucket=BUCKET)
    role_arn = aws.client("iam").create_role(RoleName="RecommenderSageMakerRole", AssumeRolePolicyDocument=TRUST)[
        "Role"
    ]["Arn"]
    return SageMakerTarget(
        region=aws.region,
        role_arn=role_arn,
        bucket=BUCKET,
        instance_type="ml.g4dn.xlarge",
        run_id="run-42",
        experiment="bert-study",
        image_uri=IMAGE,
        endpoint_instance_count=2,
        ready_timeout_s=30,
        poll_interval_s=0.2,
        boto_session=aws.session,
        endpoint_url=aws.url,
    )


def _tags(aws, arn: str) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in aws.client("sagemaker").list_tags(ResourceArn=arn)["Tags"]}


def _inventory(aws) -> dict[str, list[str]]:
    sagemaker, s3 = aws.client("sagemaker"), aws.client("s3")
    return {
        "endpoints": [e["EndpointName"] for e in sagemaker.list_endpoints()["Endpoints"]],
        "endpoint_configs": [c["EndpointConfigName"] for c in sagemaker.list_endpoint_configs()["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sagemaker.list_models()["Models"]],
        "objects": [o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", [])],
    }


EMPTY = {"endpoints": [], "endpoint_configs": [], "models": [], "objects": []}


def test_preflight_passes_with_role_bucket_and_image(target: SageMakerTarget) -> None:
    target.preflight()


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"role_arn": "RecommenderSageMakerRole"}, "is not an IAM role ARN"),
        ({"role_arn": "arn:aws:iam::123456789012:role/Missing"}, "IAM role Missing does not exist"),
        ({"bucket": "no-such-bucket-here"}, "S3 bucket no-such-bucket-here does not exist"),
        ({"instance_type": "g5.xlarge"}, "not a SageMaker instance type"),
        ({"image_uri": "nvcr.io/nvidia/tritonserver:24.09-py3"}, "not an ECR image URI"),
        ({"image_uri": IMAGE.replace("us-east-1", "eu-west-1")}, "image is in eu-west-1"),
    ],
)
def test_preflight_names_the_problem_with_a_hint(target: SageMakerTarget, change: dict, message: str) -> None:
    for key, value in change.items():
        setattr(target, key, value)
    with pytest.raises(TargetError, match=message) as caught:
        target.preflight()
    assert caught.value.hint


def test_missing_image_without_sdk_asks_for_the_uri(target: SageMakerTarget) -> None:
    """The SageMaker SDK is not a dependency; without it the image URI must be given."""
    try:
        import sagemaker  # noqa: F401
    except ImportError:
        target.image_uri = None
        with pytest.raises(TargetError, match="SageMaker Python SDK is not installed"):
            target.preflight()
    else:
        pytest.skip("sagemaker SDK installed; the look-up path is used instead")


def test_deploy_reaches_in_service_tags_everything_and_teardown_removes_it(aws, target, repository, tmp_path) -> None:
    deployment = target.deploy(repository, "minilm", tmp_path / "run")
    sagemaker = aws.client("sagemaker")

    endpoint = sagemaker.describe_endpoint(EndpointName=deployment.endpoint_name)
    assert endpoint["EndpointStatus"] == "InService"
    assert deployment.endpoint == f"sagemaker://{deployment.endpoint_name}"
    assert deployment.statistics() == {} and deployment.metrics_url is None and deployment.log_path is None
    model = sagemaker.describe_model(ModelName=deployment.resource_name)
    assert model["PrimaryContainer"]["Image"] == IMAGE
    assert model["PrimaryContainer"]["ModelDataUrl"] == deployment.s3_uri
    assert model["PrimaryContainer"]["Environment"] == {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "minilm"}
    variant = sagemaker.describe_endpoint_config(EndpointConfigName=deployment.resource_name)["ProductionVariants"][0]
    assert (variant["VariantName"], variant["InstanceType"], variant["InitialInstanceCount"]) == (
        "AllTraffic",
        "ml.g4dn.xlarge",
        2,
    )

    expected = {TAG_RUN_ID: "run-42", TAG_EXPERIMENT: "bert-study"}
    for arn in (
        endpoint["EndpointArn"],
        model["ModelArn"],
        sagemaker.describe_endpoint_config(EndpointConfigName=deployment.resource_name)["EndpointConfigArn"],
    ):
        assert _tags(aws, arn) == expected
    object_tags = aws.client("s3").get_object_tagging(Bucket=BUCKET, Key=deployment.s3_key)["TagSet"]
    assert {t["Key"]: t["Value"] for t in object_tags} == expected
    assert _inventory(aws)["objects"] == [deployment.s3_key]

    deployment.teardown()
    assert _inventory(aws) == EMPTY
    deployment.teardown()  # idempotent
    assert deployment.created == set()


@pytest.mark.parametrize("interruption", [RuntimeError("load generator crashed"), KeyboardInterrupt()])
def test_leaving_the_with_block_on_an_exception_tears_down(aws, target, repository, tmp_path, interruption) -> None:
    with pytest.raises(type(interruption)), target.deploy(repository, "minilm", tmp_path / "run") as deployment:
        assert _inventory(aws)["endpoints"] == [deployment.endpoint_name]
        raise interruption
    assert _inventory(aws) == EMPTY


def test_failed_deploy_leaves_nothing_behind(aws, target, repository, tmp_path) -> None:
    target.bucket = "bucket-that-is-not-there"
    with pytest.raises(TargetError, match=r"upload of .* failed: .*\(NoSuchBucket\)"):
        target.deploy(repository, "minilm", tmp_path / "run")
    assert _inventory(aws) == EMPTY


def test_cloudwatch_metrics_reads_every_endpoint_series(aws, target, repository, tmp_path) -> None:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    with target.deploy(repository, "minilm", tmp_path / "run") as deployment:
        dims = [
            {"Name": "EndpointName", "Value": deployment.endpoint_name},
            {"Name": "VariantName", "Value": "AllTraffic"},
        ]
        cloudwatch = aws.client("cloudwatch")
        # moto accepts data in the AWS/ namespaces (real CloudWatch reserves them for SageMaker itself).
        for minute, latency in ((2, 1500.0), (1, 2500.0)):
            cloudwatch.put_metric_data(
                Namespace="AWS/SageMaker",
                MetricData=[
                    {
                        "MetricName": "ModelLatency",
                        "Dimensions": dims,
                        "Value": latency,
                        "Timestamp": now - timedelta(minutes=minute),
                    },
                    {
                        "MetricName": "Invocations",
                        "Dimensions": dims,
                        "Value": 600.0,
                        "Timestamp": now - timedelta(minutes=minute),
                    },
                ],
            )
        cloudwatch.put_metric_data(
            Namespace="/aws/sagemaker/Endpoints",
            MetricData=[
                {
                    "MetricName": "GPUUtilization",
                    "Dimensions": dims,
                    "Value": 63.0,
                    "Timestamp": now - timedelta(minutes=1),
                }
            ],
        )

        series = cloudwatch_metrics(deployment, now - timedelta(minutes=10), now + timedelta(minutes=1))

    assert set(series) == {
        "ModelLatency",
        "OverheadLatency",
        "Invocations",
        "CPUUtilization",
        "GPUUtilization",
        "GPUMemoryUtilization",
    }
    assert series["ModelLatency"].values == [1500.0, 2500.0]  # oldest first
    assert series["ModelLatency"].unit == "microseconds"
    assert series["Invocations"].values == [600.0, 600.0] and series["Invocations"].statistic == "Sum"
    assert (
        series["GPUUtilization"].values == [63.0] and series["GPUUtilization"].namespace == "/aws/sagemaker/Endpoints"
    )
    assert series["OverheadLatency"].values == []


def _create_set(aws, name: str, tags: list[dict[str, str]]) -> datetime:
    sagemaker = aws.client("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/R",
        Tags=tags,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": f"s3://{BUCKET}/{name}.tar.gz"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        Tags=tags,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 1}
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)
    return sagemaker.describe_endpoint(EndpointName=name)["CreationTime"]


def test_cleanup_deletes_only_tagged_resources_older_than_the_cutoff(aws, target) -> None:
    old_run = [{"Key": TAG_RUN_ID, "Value": "run-old"}, {"Key": TAG_EXPERIMENT, "Value": "bert-study"}]
    _create_set(aws, "tagged-old", old_run)
    _create_set(aws, "untagged-old", [{"Key": "team", "Value": "search"}])
    time.sleep(0.05)
    mid = datetime.now(UTC)
    time.sleep(0.05)
    _create_set(aws, "tagged-new", [{"Key": TAG_RUN_ID, "Value": "run-new"}])
    later = mid + timedelta(hours=2)  # "now" two hours after the first run: older_than=2h puts the cutoff at `mid`

    preview = cleanup(target.clients, older_than=timedelta(hours=2), dry_run=True, now=later)
    assert (preview.endpoints, preview.endpoint_configs, preview.models) == (
        ["tagged-old"],
        ["tagged-old"],
        ["tagged-old"],
    )
    assert len(_inventory(aws)["endpoints"]) == 3  # dry run deleted nothing

    done = cleanup(target.clients, older_than=timedelta(hours=2), now=later)
    assert done.total == 3 and not done.dry_run
    assert sorted(_inventory(aws)["endpoints"]) == ["tagged-new", "untagged-old"]
    assert sorted(_inventory(aws)["models"]) == ["tagged-new", "untagged-old"]


def test_cleanup_without_age_can_select_one_run(aws, target) -> None:
    _create_set(aws, "run-a", [{"Key": TAG_RUN_ID, "Value": "a"}])
    _create_set(aws, "run-b", [{"Key": TAG_RUN_ID, "Value": "b"}])
    report = target.cleanup(run_id="b")
    assert report.endpoints == ["run-b"]
    assert _inventory(aws)["endpoint_configs"] == ["run-a"]
