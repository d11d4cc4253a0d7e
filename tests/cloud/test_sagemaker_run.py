"""`recommender run` with a sagemaker target against a real moto server process: deploy, boto3 load, teardown.

moto (5.2.1) does not run containers: endpoints go InService at once and invoke_endpoint returns bodies queued
through its API (/moto-api/static/sagemaker/endpoint-results), one per distinct request body. The queued bodies
are KServe v2 answers ({"outputs": [...]}), so the load user and the probe see well-formed answers; the latencies
measured are moto's, not a model's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from recommender.store.results import ResultStore
from tests.fixtures_text import TINY_BERT_YAML

pytestmark = pytest.mark.cloud

ROOT = Path(__file__).resolve().parents[2]  # this checkout, whichever `recommender` is installed

BUCKET = "recommender-artifacts-run"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/recommender-triton:24.10"
TRUST = (
    '{"Version":"2012-10-17","Statement":[{"Effect":"Allow",'
    '"Principal":{"Service":"sagemaker.amazonaws.com"},"Action":"sts:AssumeRole"}]}'
)
ANSWER = {
    "model_name": "model",
    "outputs": [{"name": "embedding", "datatype": "FP32", "shape": [1, 4], "data": [0.1, 0.2, 0.3, 0.4]}],
}

SPEC = (
    """
name: cloud-micro
"""
    + TINY_BERT_YAML
    + """variants:
  optimizations: [pt]
  dynamic_batching: [false, true]
  instance_counts: [1]
  max_batch_sizes: [4]
target:
  kind: sagemaker
  instance_type: ml.c5.xlarge
  region: us-east-1
  role_arn: "{role_arn}"
  bucket: {bucket}
  image_uri: {image}
  endpoint_url: {url}
  ready_timeout_seconds: 30
  budget_usd: {budget}
correctness: off  # moto's endpoint answers a canned 4-value embedding, not the model's outputs
traffic:
  warmup_seconds: 0
  phases:
    - {{initial_users: 2, spawn_rate: 0, duration_seconds: 3}}
"""
)


def recommender(workdir: Path, url: str, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "COLUMNS": "200",
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    env.pop("AWS_PROFILE", None)
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args], cwd=workdir, capture_output=True, text=True, timeout=300, env=env
    )


def queue_answers(url: str, count: int) -> None:
    """Every distinct request body moto sees takes the next queued answer."""
    results = [{"Body": json.dumps(ANSWER), "ContentType": "application/json"} for _ in range(count)]
    request = urllib.request.Request(
        f"{url}/moto-api/static/sagemaker/endpoint-results",
        method="POST",
        data=json.dumps({"results": results}).encode(),
        headers={"Content-Type": "application/json"},
    )
    urllib.request.urlopen(request, timeout=10).close()


@pytest.fixture
def workdir(aws, tmp_path) -> Path:
    aws.client("s3").create_bucket(Bucket=BUCKET)
    role_arn = aws.client("iam").create_role(RoleName="RecommenderSageMakerRole", AssumeRolePolicyDocument=TRUST)[
        "Role"
    ]["Arn"]
    settings = {"role_arn": role_arn, "bucket": BUCKET, "image": IMAGE, "url": aws.url}
    (tmp_path / "cloud.yaml").write_text(SPEC.format(**settings, budget=5))
    (tmp_path / "tiny-budget.yaml").write_text(SPEC.format(**settings, budget=0.01))
    return tmp_path


def leftovers(aws) -> dict[str, list]:
    sagemaker = aws.client("sagemaker")
    return {
        "endpoints": sagemaker.list_endpoints()["Endpoints"],
        "configs": sagemaker.list_endpoint_configs()["EndpointConfigs"],
        "models": sagemaker.list_models()["Models"],
        "objects": aws.client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", []),
    }


def test_run_on_sagemaker_measures_through_invoke_endpoint_and_leaves_nothing(aws, workdir) -> None:
    queue_answers(aws.url, 50)
    done = recommender(workdir, aws.url, "run", "cloud.yaml")
    assert done.returncode == 0, done.stdout + done.stderr

    results = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}").results("cloud-micro")
    assert [r.status for r in results] == ["ok", "ok"], [r.reason for r in results]
    for result in results:
        assert result.headline.requests > 0 and result.headline.failures == 0
        assert result.headline.invocations_per_minute > 0
        cloudwatch = result.server_stats["cloudwatch"]
        assert cloudwatch["source"] == "cloudwatch" and "ModelLatency" in cloudwatch["metrics"]
    assert leftovers(aws) == {"endpoints": [], "configs": [], "models": [], "objects": []}
    load_dir = next(workdir.glob(".recommender/runs/cloud-micro/*/load"))
    assert "Traceback" not in (load_dir / "locust.stderr.log").read_text()


def test_canned_answers_without_outputs_are_failures(aws, workdir) -> None:
    """Nothing queued: moto's static body "body" is not an inference answer, so the probe refuses the endpoint."""
    done = recommender(workdir, aws.url, "run", "cloud.yaml")
    assert done.returncode == 1, done.stdout + done.stderr  # nothing measured: exit 1 after the table (issue 23)
    assert "no candidate was measured" in done.stdout
    results = ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}").results("cloud-micro")
    assert {r.status for r in results} == {"failed"}
    assert "has no outputs" in results[0].reason
    assert leftovers(aws) == {"endpoints": [], "configs": [], "models": [], "objects": []}


def test_run_over_budget_refuses_before_deploying(aws, workdir) -> None:
    done = recommender(workdir, aws.url, "run", "tiny-budget.yaml")
    assert done.returncode == 1
    assert "above the budget of $0.01" in done.stderr
    assert leftovers(aws) == {"endpoints": [], "configs": [], "models": [], "objects": []}
