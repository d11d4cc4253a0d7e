"""`recommender cleanup` and the remote target's SageMaker side against the moto server."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.errors import TargetError
from recommender.targets.aws import TAG_RUN_ID
from recommender.targets.remote import RemoteTarget
from tests.fake_docker import calls, install_fake_docker

pytestmark = pytest.mark.cloud
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/recommender-triton:24.10"


def _endpoint(aws, name: str, tags: list[dict[str, str]]) -> None:
    sagemaker = aws.client("sagemaker")
    sagemaker.create_model(
        ModelName=name,
        ExecutionRoleArn="arn:aws:iam::123456789012:role/R",
        Tags=tags,
        PrimaryContainer={"Image": IMAGE, "ModelDataUrl": "s3://b/m.tar.gz"},
    )
    sagemaker.create_endpoint_config(
        EndpointConfigName=name,
        Tags=tags,
        ProductionVariants=[
            {"VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.c5.xlarge", "InitialInstanceCount": 1}
        ],
    )
    sagemaker.create_endpoint(EndpointName=name, EndpointConfigName=name, Tags=tags)


@pytest.fixture
def credentials(monkeypatch) -> None:
    for key, value in (
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ):
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_cleanup_dry_run_then_delete_tagged_only(aws, credentials) -> None:
    _endpoint(aws, "leftover", [{"Key": TAG_RUN_ID, "Value": "r1"}])
    _endpoint(aws, "production", [{"Key": "team", "Value": "search"}])
    app, runner = build_app(), CliRunner()
    preview = runner.invoke(app, ["cleanup", "--older-than", "0s", "--dry-run", "--endpoint-url", aws.url])
    assert preview.exit_code == 0, preview.output
    assert "would delete endpoint leftover" in preview.output and "3 resource(s) would delete" in preview.output
    assert len(aws.client("sagemaker").list_endpoints()["Endpoints"]) == 2
    done = runner.invoke(app, ["cleanup", "--older-than", "0s", "--endpoint-url", aws.url])
    assert "3 resource(s) deleted" in done.output
    assert [e["EndpointName"] for e in aws.client("sagemaker").list_endpoints()["Endpoints"]] == ["production"]
    assert [m["ModelName"] for m in aws.client("sagemaker").list_models()["Models"]] == ["production"]
    old_only = runner.invoke(app, ["cleanup", "--older-than", "2h", "--endpoint-url", aws.url])
    assert "nothing to clean up" in old_only.output


def test_remote_sagemaker_endpoint_is_used_and_never_deleted(aws, tmp_path) -> None:
    _endpoint(aws, "existing", [])
    target = RemoteTarget(endpoint="sagemaker://existing", boto_session=aws.session, endpoint_url=aws.url)
    target.preflight()
    with target.deploy(None, "model", tmp_path) as deployment:
        assert deployment.endpoint == "sagemaker://existing"
        assert (
            deployment.invoke_target.url()
            == f"sagemaker://existing?region=us-east-1&endpoint_url={aws.url.replace(':', '%3A').replace('/', '%2F')}"
        )
    assert [e["EndpointName"] for e in aws.client("sagemaker").list_endpoints()["Endpoints"]] == ["existing"]
    with pytest.raises(TargetError, match="DescribeEndpoint missing failed"):
        RemoteTarget(endpoint="sagemaker://missing", boto_session=aws.session, endpoint_url=aws.url).preflight()


def test_cleanup_removes_the_runs_labelled_containers_too(aws, credentials, tmp_path, monkeypatch) -> None:
    fake = install_fake_docker(tmp_path / "bin", monkeypatch)  # no Docker engine here: a fake docker CLI
    (fake / "ps.out").write_text("recommender-1a2b\t2025-01-02 03:04:05 +0000 UTC\n")
    done = CliRunner().invoke(build_app(), ["cleanup", "--run-id", "r9", "--endpoint-url", aws.url])
    assert done.exit_code == 0, done.output
    assert "deleted container recommender-1a2b" in done.output and "1 resource(s) deleted" in done.output
    assert calls(fake)[-1] == "rm --force recommender-1a2b"
    assert "label=recommender.run-id=r9" in calls(fake)[0]
    (fake / "ps.rc").write_text("1")  # a docker CLI whose engine is down: containers are not checked, the rest goes on
    down = CliRunner().invoke(build_app(), ["cleanup", "--run-id", "r9", "--endpoint-url", aws.url])
    assert down.exit_code == 0 and "containers not checked: docker ps failed: Cannot connect" in down.output


def test_cleanup_removes_the_runs_tagged_s3_archives_within_its_scope(aws, credentials) -> None:
    s3, bucket = aws.client("s3"), "artifacts"
    s3.create_bucket(Bucket=bucket)
    objects = {
        "recommender/r1/rec-r1-a/model.tar.gz": "r1",
        "recommender/r2/rec-r2-b/model.tar.gz": "r2",
        "recommender/r1/notes.txt": None,
        "elsewhere/r1/model.tar.gz": "r1",
    }  # untagged; outside the prefix
    for key, run in objects.items():
        s3.put_object(Bucket=bucket, Key=key, Body=b"x", **({"Tagging": f"{TAG_RUN_ID}={run}"} if run else {}))
    app, runner = build_app(), CliRunner()

    def clean(*scope: str) -> str:
        done = runner.invoke(app, ["cleanup", *scope, "--bucket", bucket, "--endpoint-url", aws.url])
        assert done.exit_code == 0, done.output
        return done.output

    def keys() -> set[str]:
        return {o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", [])}

    preview = clean("--run-id", "r1", "--dry-run")
    assert "would delete S3 object s3://artifacts/recommender/r1/rec-r1-a/model.tar.gz" in preview
    assert "1 resource(s) would delete" in preview and keys() == set(objects)
    assert "1 resource(s) deleted" in clean("--run-id", "r1")
    assert keys() == set(objects) - {"recommender/r1/rec-r1-a/model.tar.gz"}
    assert "nothing to clean up" in clean("--older-than", "2h")  # r2's archive is seconds old
    assert "deleted S3 object s3://artifacts/recommender/r2/rec-r2-b/model.tar.gz" in clean("--older-than", "0s")
    assert keys() == {"recommender/r1/notes.txt", "elsewhere/r1/model.tar.gz"}
    unchecked = runner.invoke(app, ["cleanup", "--run-id", "r1", "--endpoint-url", aws.url])
    assert "S3 model archives not checked: pass --bucket" in unchecked.output
