"""`recommender cost` and `recommender prices` through Typer's CliRunner on the real app."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from recommender.cli import build_app
from recommender.errors import CostError

PUBLISHED = ["cost", "--ipm", "490", "--instance-type", "ml.g4dn.xlarge", "--target-ipm", "30000"]


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.chdir(tmp_path)  # no refreshed .recommender/prices.yaml: the packaged seed is used
    monkeypatch.setenv("COLUMNS", "120")
    return CliRunner()


def test_cost_prints_the_published_plan(runner: CliRunner) -> None:
    result = runner.invoke(build_app(), PUBLISHED)
    assert result.exit_code == 0, result.output
    assert "62" in result.output
    assert "45.6568" in result.output
    assert "25.0476" in result.output  # per million: 0.7364 / 29400 x 1e6


def test_cost_json_parses(runner: CliRunner) -> None:
    result = runner.invoke(build_app(), [*PUBLISHED, "--json"])
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert plan["instance_count"] == 62
    assert plan["cost_per_hour"] == 45.6568
    assert plan["cost_per_inference"] == pytest.approx(0.7364 / 29_400)
    assert plan["region"] == "us-east-1"
    assert "retrieved" in plan["price_source"]


def test_explicit_price_overrides_the_catalog(runner: CliRunner) -> None:
    result = runner.invoke(
        build_app(),
        [
            "cost",
            "--ipm",
            "100",
            "--instance-type",
            "ml.custom.size",
            "--target-ipm",
            "250",
            "--price",
            "2.5",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    # ceil(250 / 100) = 3 instances x 2.5 = 7.5 USD/h
    assert (plan["instance_count"], plan["cost_per_hour"], plan["price_source"]) == (3, 7.5, "--price")


def test_unknown_instance_type_raises_cost_error_with_suggestion(runner: CliRunner) -> None:
    result = runner.invoke(
        build_app(), ["cost", "--ipm", "490", "--instance-type", "ml.g4dn.xlarg", "--target-ipm", "30000"]
    )
    assert isinstance(result.exception, CostError)
    assert "ml.g4dn.xlarge" in result.exception.hint


def test_prices_show_lists_source_and_date(runner: CliRunner) -> None:
    result = runner.invoke(build_app(), ["prices", "show"])
    assert result.exit_code == 0, result.output
    assert "ml.g4dn.xlarge" in result.output and "0.7364" in result.output
    assert "retrieved: " in result.output


def test_prices_show_prefers_the_refreshed_copy(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / ".recommender").mkdir()
    (tmp_path / ".recommender" / "prices.yaml").write_text(
        yaml.safe_dump(
            {
                "region": "us-east-1",
                "source": "AWS Price List API",
                "retrieved": "2030-01-02",
                "instances": {"ml.g4dn.xlarge": {"usd_per_hour": 0.8}},
            }
        )
    )
    result = runner.invoke(build_app(), ["prices", "show"])
    assert "2030-01-02" in result.output and "0.8" in result.output


def test_prices_refresh_writes_the_cwd_copy(runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The command's boto3 client is swapped for one answered by a botocore Stubber (AWS is unreachable here)."""
    import boto3
    from botocore.stub import Stubber

    from tests.unit.test_prices import EXPECTED_REQUEST, price_list_item

    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    monkeypatch.setattr(boto3, "client", lambda service, **kwargs: client)
    with Stubber(client) as stubber:
        stubber.add_response(
            "get_products",
            {
                "FormatVersion": "aws_v1",
                "PriceList": [price_list_item("USE1-Host:ml.g4dn.xlarge", "0.8000000000", "AAAA1111")],
            },
            EXPECTED_REQUEST,
        )
        result = runner.invoke(build_app(), ["prices", "refresh", "--region", "us-east-1"])
    assert result.exit_code == 0, result.output
    stored = yaml.safe_load((tmp_path / ".recommender" / "prices.yaml").read_text())
    assert stored["instances"]["ml.g4dn.xlarge"]["usd_per_hour"] == 0.8
    assert "AWS Price List API" in stored["source"]
