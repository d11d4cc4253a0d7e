"""Price catalog: the packaged seed, the refreshed copy, unknown types, and refresh at the boto3 boundary."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from recommender.decide.prices import (
    Catalog,
    InstancePrice,
    fetch_prices,
    find_price,
    load_catalog,
    refresh_prices,
)
from recommender.errors import CostError

SEED = {
    "ml.g4dn.xlarge": 0.7364,
    "ml.g4dn.2xlarge": 0.94,
    "ml.g4dn.12xlarge": 4.89,
    "ml.c5.xlarge": 0.204,
    "ml.m5.large": 0.115,
    "ml.g5.xlarge": 1.4084,
    "ml.g5.2xlarge": 1.515,
    "ml.p3.2xlarge": 3.825,
    "ml.inf2.xlarge": 0.99,
}


@pytest.fixture
def in_empty_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working directory with no refreshed price file in it."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_packaged_catalog_holds_the_seed_prices(in_empty_dir: Path) -> None:
    catalog = load_catalog()
    assert catalog.region == "us-east-1"
    assert {name: item.usd_per_hour for name, item in catalog.instances.items()} == SEED
    assert "public Amazon SageMaker pricing page" in catalog.source
    assert catalog.retrieved  # the seeding date is recorded


@pytest.mark.parametrize(
    ("instance_type", "vcpus", "gpus", "gpu_memory_gib"),
    [
        ("ml.g4dn.xlarge", 4, 1, 16),
        ("ml.g4dn.12xlarge", 48, 4, 64),
        ("ml.g5.xlarge", 4, 1, 24),
        ("ml.p3.2xlarge", 8, 1, 16),
        ("ml.c5.xlarge", 4, 0, 0),
        ("ml.m5.large", 2, 0, 0),
        ("ml.inf2.xlarge", 4, 0, 0),
    ],
)
def test_packaged_hardware_figures(
    in_empty_dir: Path, instance_type: str, vcpus: int, gpus: int, gpu_memory_gib: float
) -> None:
    item, _ = find_price(instance_type, "us-east-1")
    assert (item.vcpus, item.gpus, item.gpu_memory_gib) == (vcpus, gpus, gpu_memory_gib)


def test_unknown_type_names_close_matches(in_empty_dir: Path) -> None:
    with pytest.raises(CostError, match=r"ml.g4dn.xlarg") as caught:
        find_price("ml.g4dn.xlarg", "us-east-1")
    assert "did you mean ml.g4dn.xlarge" in caught.value.hint
    assert "--price" in caught.value.hint


def test_unknown_region_says_how_to_refresh(in_empty_dir: Path) -> None:
    with pytest.raises(CostError, match="eu-west-1") as caught:
        find_price("ml.g4dn.xlarge", "eu-west-1")[0]
    assert "prices refresh --region eu-west-1" in caught.value.hint


def test_refreshed_copy_in_cwd_wins_and_shows_its_date(in_empty_dir: Path) -> None:
    refreshed = in_empty_dir / ".recommender" / "prices.yaml"
    refreshed.parent.mkdir()
    refreshed.write_text(
        yaml.safe_dump(
            {
                "region": "us-east-1",
                "source": "AWS Price List API",
                "retrieved": "2030-01-02",
                "instances": {"ml.g4dn.xlarge": {"usd_per_hour": 0.8}},
            }
        )
    )
    assert load_catalog().retrieved == "2030-01-02"
    assert find_price("ml.g4dn.xlarge", "us-east-1")[0].usd_per_hour == 0.8
    # types the refreshed copy lacks still come from the packaged seed
    assert find_price("ml.c5.xlarge", "us-east-1")[0].usd_per_hour == 0.204


def test_malformed_catalog_is_a_cost_error(tmp_path: Path) -> None:
    path = tmp_path / "prices.yaml"
    path.write_text("region: us-east-1\n")
    with pytest.raises(CostError, match="malformed"):
        load_catalog(path)


# --- refresh from the AWS Price List API --------------------------------------------------------


def price_list_item(usagetype: str, usd: str, sku: str, **attributes: str) -> str:
    """One PriceList entry as GetProducts returns it: a JSON string shaped like the real API's documents."""
    instance = usagetype.split(":", 1)[1]
    document = {
        "product": {
            "productFamily": "ML Instance",
            "attributes": {
                "regionCode": "us-east-1",
                "servicecode": "AmazonSageMaker",
                "location": "US East (N. Virginia)",
                "locationType": "AWS Region",
                "usagetype": usagetype,
                "operation": "RunInstance",
                "platoinstancetype": "Hosting",
                "component": "Hosting",
                "instanceName": instance,
                "servicename": "Amazon SageMaker",
                **attributes,
            },
            "sku": sku,
        },
        "serviceCode": "AmazonSageMaker",
        "terms": {
            "OnDemand": {
                f"{sku}.JRTCKXETXF": {
                    "priceDimensions": {
                        f"{sku}.JRTCKXETXF.6YS6EN2CT7": {
                            "unit": "Hrs",
                            "endRange": "Inf",
                            "beginRange": "0",
                            "appliesTo": [],
                            "description": f"${usd} per Hosting {instance} in US East (N. Virginia)",
                            "rateCode": f"{sku}.JRTCKXETXF.6YS6EN2CT7",
                            "pricePerUnit": {"USD": usd},
                        }
                    },
                    "sku": sku,
                    "effectiveDate": "2030-01-01T00:00:00Z",
                    "offerTermCode": "JRTCKXETXF",
                    "termAttributes": {},
                }
            }
        },
        "version": "20300101000000",
        "publicationDate": "2030-01-01T00:00:00Z",
    }
    return json.dumps(document)


EXPECTED_REQUEST = {
    "ServiceCode": "AmazonSageMaker",
    "Filters": [
        {"Type": "TERM_MATCH", "Field": "productFamily", "Value": "ML Instance"},
        {"Type": "TERM_MATCH", "Field": "platoinstancetype", "Value": "Hosting"},
        {"Type": "TERM_MATCH", "Field": "regionCode", "Value": "us-east-1"},
    ],
    "FormatVersion": "aws_v1",
}


@pytest.fixture
def pricing_client():
    """A real boto3 `pricing` client whose calls a botocore Stubber answers.

    The Stubber is a stand-in for the AWS Price List API, which cannot be reached from here: it checks
    each request against the service model and the expected parameters, and replies with pages shaped
    like the real GetProducts responses. No network, no credentials.
    """
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()


def stub_two_pages(stubber: Stubber) -> None:
    first = [
        price_list_item(
            "USE1-Host:ml.g4dn.xlarge", "0.8000000000", "AAAA1111", vCpu="4", memory="16 GiB", gpu="1", gpuMemory="16"
        ),
        # a non-hosting SKU that slipped through the filter is ignored
        price_list_item("USE1-Tsform:ml.g4dn.xlarge", "0.9000000000", "BBBB2222", vCpu="4", memory="16 GiB"),
    ]
    second = [
        price_list_item(
            "USE1-Host:ml.g6.xlarge", "1.4000000000", "CCCC3333", vCpu="4", memory="16 GiB", gpu="1", gpuMemory="24"
        )
    ]
    stubber.add_response(
        "get_products", {"FormatVersion": "aws_v1", "PriceList": first, "NextToken": "page-2"}, EXPECTED_REQUEST
    )
    stubber.add_response(
        "get_products", {"FormatVersion": "aws_v1", "PriceList": second}, {**EXPECTED_REQUEST, "NextToken": "page-2"}
    )


def test_refresh_reads_every_page_and_stores_the_dated_catalog(pricing_client, tmp_path: Path) -> None:
    client, stubber = pricing_client
    stub_two_pages(stubber)
    target = tmp_path / ".recommender" / "prices.yaml"
    catalog = refresh_prices(client, "us-east-1", path=target, today=date(2030, 1, 2))

    assert catalog.path == target
    assert catalog.retrieved == "2030-01-02"
    assert "AWS Price List API" in catalog.source
    assert catalog.instances["ml.g4dn.xlarge"].usd_per_hour == 0.8
    # known type: hardware figures kept from the hand-checked seed
    assert catalog.instances["ml.g4dn.xlarge"].accelerator == "NVIDIA T4"
    # new type: figures parsed from the price list (gpuMemory is per GPU)
    assert catalog.instances["ml.g6.xlarge"] == InstancePrice(
        "ml.g6.xlarge", 1.4, vcpus=4, memory_gib=16.0, gpus=1, gpu_memory_gib=24.0
    )
    stored = load_catalog(target)
    assert stored.retrieved == "2030-01-02"
    assert stored.instances == catalog.instances


def test_refresh_keeps_only_asked_types(pricing_client) -> None:
    client, stubber = pricing_client
    stub_two_pages(stubber)
    catalog = fetch_prices(client, "us-east-1", instance_types=["ml.g6.xlarge"])
    assert list(catalog.instances) == ["ml.g6.xlarge"]


def test_refresh_names_types_the_api_does_not_price(pricing_client) -> None:
    client, stubber = pricing_client
    stub_two_pages(stubber)
    with pytest.raises(CostError, match=r"ml.g4dn.xlargee"):
        fetch_prices(client, "us-east-1", instance_types=["ml.g4dn.xlarge", "ml.g4dn.xlargee"])


def test_api_failure_becomes_a_cost_error_with_a_hint(pricing_client) -> None:
    client, stubber = pricing_client
    stubber.add_client_error(
        "get_products",
        service_error_code="AccessDeniedException",
        service_message="not authorized to perform pricing:GetProducts",
        expected_params=EXPECTED_REQUEST,
    )
    with pytest.raises(CostError, match="AccessDenied") as caught:
        fetch_prices(client, "us-east-1")
    assert "pricing:GetProducts" in caught.value.hint


def test_catalog_document_round_trips(tmp_path: Path) -> None:
    catalog = Catalog(
        region="eu-west-1",
        source="test",
        retrieved="2030-01-02",
        instances={"ml.m5.large": InstancePrice("ml.m5.large", 0.128, vcpus=2, memory_gib=8)},
    )
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(catalog.to_document()))
    assert load_catalog(path).instances == catalog.instances
