"""Several instance types measured in parallel on SageMaker (a real moto server process): one experiment with three
g4dn targets and max_parallel 3 deploys, loads and deletes the endpoints concurrently (their runs overlap in time),
ranks them by their own catalog prices, and the budget holds across the concurrent candidates."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from recommender.decide.budget import estimate_plan
from recommender.spec import load_spec
from recommender.store.results import ResultStore
from tests.cloud.test_sagemaker_run import BUCKET, IMAGE, TRUST, leftovers, queue_answers, recommender
from tests.fixtures_text import TINY_BERT_YAML

pytestmark = pytest.mark.cloud

SIZES = ("xlarge", "2xlarge", "12xlarge")
SPEC = (
    """
name: {name}
"""
    + TINY_BERT_YAML
    + """variants: {{optimizations: [pt], dynamic_batching: [false], instance_counts: [1], max_batch_sizes: [4]}}
max_parallel: 3
targets:
{targets}
correctness: off  # moto's endpoint answers a canned embedding, not the model's outputs
traffic:
  warmup_seconds: 0
  phases:
    - {{initial_users: 1, spawn_rate: 0, duration_seconds: 3}}
"""
)
TARGET = """  - {{kind: sagemaker, instance_type: ml.g4dn.{size}, region: us-east-1, role_arn: "{role_arn}",
     bucket: {bucket}, image_uri: {image}, endpoint_url: {url}, ready_timeout_seconds: 30{extra}}}"""


@pytest.fixture
def settings(aws) -> dict[str, str]:
    aws.client("s3").create_bucket(Bucket=BUCKET)
    role_arn = aws.client("iam").create_role(RoleName="RecommenderSageMakerRole", AssumeRolePolicyDocument=TRUST)[
        "Role"
    ]["Arn"]
    queue_answers(aws.url, 200)
    return {"role_arn": role_arn, "bucket": BUCKET, "image": IMAGE, "url": aws.url}


def write_spec(path: Path, name: str, settings: dict[str, str], extra: str = "") -> Path:
    targets = "\n".join(TARGET.format(size=size, extra=extra, **settings) for size in SIZES)
    path.write_text(SPEC.format(name=name, targets=targets))
    return path


def overlap(a, b) -> bool:
    return a.started_at < b.finished_at and b.started_at < a.finished_at


def test_three_instance_types_run_concurrently_and_rank_by_their_own_prices(aws, settings, tmp_path) -> None:
    write_spec(tmp_path / "sizes.yaml", "sizes", settings)
    done = recommender(tmp_path, aws.url, "run", "sizes.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = store.results("sizes")
    assert sorted(r.config["instance_type"] for r in results) == [f"ml.g4dn.{s}" for s in sorted(SIZES)]
    assert [r.status for r in results] == ["ok"] * 3, [r.reason for r in results]
    runs = list(store.runs("sizes"))
    assert all(overlap(a, b) for a, b in itertools.combinations(runs, 2))  # deployed, measured, deleted together
    assert len({r.artifacts_dir for r in runs}) == 3  # each its own run directory
    assert leftovers(aws) == {"endpoints": [], "configs": [], "models": [], "objects": []}
    ranked = recommender(tmp_path, aws.url, "rank", "sizes", "--json")
    assert ranked.returncode == 0, ranked.stdout + ranked.stderr
    for size in SIZES:
        assert f"ml.g4dn.{size}" in ranked.stdout


def test_the_budget_holds_across_concurrent_candidates(aws, settings, tmp_path) -> None:
    """Earlier spend leaves room for two candidates' estimates, not three: two run together, the third is skipped."""
    spec_path = write_spec(
        tmp_path / "budget.yaml", "budgeted", settings, extra=", price_per_hour: 36.0, budget_usd: 20"
    )
    spec = load_spec(spec_path)
    per_candidate = estimate_plan(spec, 1).usd  # 3 s of load + 10 min deploy overhead at $36/h: about $6.03
    (tmp_path / ".recommender").mkdir()
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    store.save_experiment(spec, status="done")
    store.add_spend("budgeted", 20 - 2 * per_candidate - 1.0)  # $13.06 left: two estimates fit, three do not
    done = recommender(tmp_path, aws.url, "run", "budget.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    results = store.results("budgeted")
    assert sorted(r.status for r in results) == ["ok", "ok", "skipped"], [r.reason for r in results]
    (skipped,) = [r for r in results if r.status == "skipped"]
    assert skipped.reason.startswith("budget: ") and "held for running candidates" in skipped.reason
    ok_runs = [run for run in store.runs("budgeted") if run.status == "ok"]
    assert overlap(*ok_runs)
    assert store.experiment("budgeted").status == "budget-exhausted"
    assert leftovers(aws) == {"endpoints": [], "configs": [], "models": [], "objects": []}
