"""infra/cloudformation.yaml: cfn-lint clean, and deployed into the moto server with CloudFormation."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

pytestmark = pytest.mark.cloud

TEMPLATE = Path(__file__).resolve().parents[2] / "infra" / "cloudformation.yaml"
STACK = "recommender-infra"


class _CfnLoader(yaml.SafeLoader):
    """Reads CloudFormation short-form tags (!Sub, !Ref, !GetAtt) as {"Fn": value} mappings."""


_CfnLoader.add_multi_constructor(
    "!", lambda loader, tag, node: {tag: loader.construct_scalar(node) if isinstance(node, yaml.ScalarNode) else None}
)


@pytest.fixture(scope="module")
def template() -> dict:
    return yaml.load(TEMPLATE.read_text(), Loader=_CfnLoader)


def test_cfn_lint_passes() -> None:
    executable = shutil.which("cfn-lint")
    if executable is None:
        pytest.skip("cfn-lint is not installed")
    result = subprocess.run([executable, str(TEMPLATE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_template_declares_the_hardening_moto_cannot_show(template: dict) -> None:
    """Properties moto 5.2.1's CloudFormation does not apply (see the xfail test below), checked in the template."""
    bucket = template["Resources"]["ArtifactBucket"]["Properties"]
    assert bucket["PublicAccessBlockConfiguration"] == {
        "BlockPublicAcls": True,
        "BlockPublicPolicy": True,
        "IgnorePublicAcls": True,
        "RestrictPublicBuckets": True,
    }
    assert bucket["VersioningConfiguration"] == {"Status": "Enabled"}
    assert template["Resources"]["ServingRepository"]["Properties"]["ImageScanningConfiguration"] == {
        "ScanOnPush": True
    }


def _actions(statement: dict) -> list[str]:
    return [statement["Action"]] if isinstance(statement["Action"], str) else statement["Action"]


def test_operator_policy_creates_and_deletes_only_tagged_recommender_resources(template: dict) -> None:
    """Creates carry the recommender:run-id tag (aws:RequestTag), deletes find it (aws:ResourceTag), both only on
    rec-* names; what stays unconditioned only reads or invokes."""
    statements = template["Resources"]["OperatorPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    sagemaker = [s for s in statements if any(a.startswith("sagemaker:") for a in _actions(s))]
    by_action = {action: s for s in sagemaker for action in _actions(s)}
    for action in (
        "sagemaker:CreateEndpoint",
        "sagemaker:CreateEndpointConfig",
        "sagemaker:CreateModel",
        "sagemaker:AddTags",
    ):
        assert by_action[action]["Condition"] == {"Null": {"aws:RequestTag/recommender:run-id": "false"}}, action
    for action in ("sagemaker:DeleteEndpoint", "sagemaker:DeleteEndpointConfig", "sagemaker:DeleteModel"):
        assert by_action[action]["Condition"] == {"Null": {"aws:ResourceTag/recommender:run-id": "false"}}, action
    for action in (a for a in by_action if a.split(":")[1].startswith(("Create", "Delete", "Add", "Update"))):
        assert all(next(iter(r.values())).endswith("/rec-*") for r in by_action[action]["Resource"]), action
    unconditioned = {a for s in sagemaker if "Condition" not in s for a in _actions(s) if a.startswith("sagemaker:")}
    assert unconditioned == {
        "sagemaker:DescribeEndpoint",
        "sagemaker:InvokeEndpoint",
        "sagemaker:ListTags",
        "sagemaker:ListEndpointConfigs",
        "sagemaker:ListEndpoints",
        "sagemaker:ListModels",
    }


def test_operator_policy_writes_and_deletes_s3_objects_only_under_the_artifact_prefix(template: dict) -> None:
    """S3 has no tag condition for DeleteObject / PutObject (see the template's comment): the prefix confines them."""
    statements = template["Resources"]["OperatorPolicy"]["Properties"]["PolicyDocument"]["Statement"]
    s3 = [s for s in statements if any(a.startswith("s3:") for a in _actions(s))]
    writes = [s for s in s3 if any(a.split(":")[1].startswith(("Put", "Delete")) for a in _actions(s))]
    assert {a for s in writes for a in _actions(s)} >= {"s3:PutObject", "s3:DeleteObject"}
    assert all(s["Resource"] == {"Sub": "${ArtifactBucket.Arn}/${ArtifactPrefix}/*"} for s in writes), writes
    assert not {a for s in s3 for a in _actions(s)} & {
        "s3:PutObjectTagging",
        "s3:DeleteObjectTagging",
        "s3:DeleteBucket",
    }


def _document(document: dict | str) -> dict:
    """moto 5.2.1 returns inline policies created by CloudFormation as a Python repr string, not JSON."""
    if isinstance(document, dict):
        return document
    try:
        return json.loads(document)
    except json.JSONDecodeError:
        return ast.literal_eval(document)


@pytest.fixture
def stack(aws):
    cloudformation = aws.client("cloudformation")
    cloudformation.create_stack(StackName=STACK, TemplateBody=TEMPLATE.read_text(), Capabilities=["CAPABILITY_IAM"])
    described = cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]
    assert described["StackStatus"] == "CREATE_COMPLETE", described.get("StackStatusReason")
    yield {output["OutputKey"]: output["OutputValue"] for output in described["Outputs"]}
    cloudformation.delete_stack(StackName=STACK)


def test_stack_creates_role_bucket_and_repository(aws, stack: dict) -> None:
    assert set(stack) == {"RoleArn", "BucketName", "ArtifactPrefix", "RepositoryUri", "OperatorPolicyArn"}
    iam = aws.client("iam")
    role_name = stack["RoleArn"].rsplit("/", 1)[1]
    trust = iam.get_role(RoleName=role_name)["Role"]["AssumeRolePolicyDocument"]["Statement"]
    assert [(s["Principal"], s["Action"]) for s in trust] == [
        ({"Service": "sagemaker.amazonaws.com"}, "sts:AssumeRole")
    ]
    policies = {
        name: _document(iam.get_role_policy(RoleName=role_name, PolicyName=name)["PolicyDocument"])["Statement"]
        for name in iam.list_role_policies(RoleName=role_name)["PolicyNames"]
    }
    actions = {
        action
        for statements in policies.values()
        for s in statements
        for action in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert actions == {
        "s3:GetObject",
        "s3:ListBucket",
        "ecr:BatchCheckLayerAvailability",
        "ecr:BatchGetImage",
        "ecr:GetDownloadUrlForLayer",
        "ecr:GetAuthorizationToken",
        "logs:CreateLogGroup",
        "logs:CreateLogStream",
        "logs:DescribeLogStreams",
        "logs:PutLogEvents",
        "cloudwatch:PutMetricData",
    }
    read = next(s for s in policies["recommender-model-artifacts-read"] if s["Action"] == "s3:GetObject")
    assert read["Resource"] == f"arn:aws:s3:::{stack['BucketName']}/recommender/*"  # the prefix only, read only
    assert not any(
        s["Resource"] == "*" and s["Action"] not in ("ecr:GetAuthorizationToken", "cloudwatch:PutMetricData")
        for statements in policies.values()
        for s in statements
    )

    encryption = aws.client("s3").get_bucket_encryption(Bucket=stack["BucketName"])["ServerSideEncryptionConfiguration"]
    assert encryption["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"

    repository = aws.client("ecr").describe_repositories(repositoryNames=["recommender/tritonserver"])["repositories"][
        0
    ]
    assert repository["imageTagMutability"] == "IMMUTABLE"
    assert stack["RepositoryUri"] == repository["repositoryUri"]
    assert (
        aws.client("iam").get_policy(PolicyArn=stack["OperatorPolicyArn"])["Policy"]["Arn"]
        == stack["OperatorPolicyArn"]
    )


@pytest.mark.xfail(
    strict=True,
    reason="moto 5.2.1 CloudFormation ignores S3 PublicAccessBlockConfiguration and "
    "VersioningConfiguration, and drops ECR ImageScanningConfiguration (CFN key casing); "
    "strict, so this turns red when moto starts applying them",
)
def test_stack_applies_public_access_block_versioning_and_scan_on_push(aws, stack: dict) -> None:
    s3 = aws.client("s3")
    block = s3.get_public_access_block(Bucket=stack["BucketName"])["PublicAccessBlockConfiguration"]
    assert all(block.values())
    assert s3.get_bucket_versioning(Bucket=stack["BucketName"]).get("Status") == "Enabled"
    repository = aws.client("ecr").describe_repositories(repositoryNames=["recommender/tritonserver"])["repositories"][
        0
    ]
    assert repository["imageScanningConfiguration"] == {"scanOnPush": True}


def test_deleting_the_stack_removes_role_and_repository_but_retains_the_bucket(aws) -> None:
    cloudformation = aws.client("cloudformation")
    cloudformation.create_stack(StackName=STACK, TemplateBody=TEMPLATE.read_text(), Capabilities=["CAPABILITY_IAM"])
    outputs = {
        o["OutputKey"]: o["OutputValue"]
        for o in cloudformation.describe_stacks(StackName=STACK)["Stacks"][0]["Outputs"]
    }
    cloudformation.delete_stack(StackName=STACK)

    assert aws.client("ecr").describe_repositories()["repositories"] == []
    with pytest.raises(aws.client("iam").exceptions.NoSuchEntityException):
        aws.client("iam").get_role(RoleName=outputs["RoleArn"].rsplit("/", 1)[1])
    # DeletionPolicy: Retain keeps model archives (and their versions) after the stack is gone
    assert outputs["BucketName"] in [b["Name"] for b in aws.client("s3").list_buckets()["Buckets"]]
