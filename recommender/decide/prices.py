"""SageMaker real-time hosting prices: a catalog read from YAML data, and its refresh from the AWS Price List API.

The packaged `recommender/decide/prices.yaml` is a hand-seeded snapshot; `refresh_prices` writes a newer
one (with its retrieval date) to `.recommender/prices.yaml` in the working directory, which
`load_catalog` then prefers. A catalog holds one region.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from botocore.exceptions import BotoCoreError, ClientError

from recommender.errors import CatalogError, CostError
from recommender.files import paths
from recommender.files.document import load_yaml

REFRESHED_PATH = paths.REFRESHED_PRICES
SERVICE_CODE = "AmazonSageMaker"
# Real-time endpoint SKUs: product family "ML Instance", SageMaker component "Hosting", whose usage
# type reads "<REGION-PREFIX>-Host:ml.<type>" (for example "USE1-Host:ml.g4dn.xlarge").
HOSTING_FILTERS = (("productFamily", "ML Instance"), ("platoinstancetype", "Hosting"))
HOSTING_USAGE_MARK = "-Host:"


@dataclass(frozen=True)
class InstancePrice:
    """One instance type: its on-demand hosting price and the hardware it gives you."""

    instance_type: str
    usd_per_hour: float
    vcpus: int | None = None
    memory_gib: float | None = None
    gpus: int | None = None
    gpu_memory_gib: float | None = None
    accelerator: str | None = None


@dataclass(frozen=True)
class Catalog:
    """Prices for one region, with where they came from and when."""

    region: str
    source: str
    retrieved: str
    instances: dict[str, InstancePrice] = field(default_factory=dict)
    currency: str = "USD"
    path: Path | None = None

    def to_document(self) -> dict[str, Any]:
        """The YAML document this catalog is stored as."""
        return {
            "region": self.region,
            "currency": self.currency,
            "unit": "per instance-hour",
            "source": self.source,
            "retrieved": self.retrieved,
            "instances": {name: _instance_fields(item) for name, item in sorted(self.instances.items())},
        }


def _instance_fields(item: InstancePrice) -> dict[str, Any]:
    fields = asdict(item)
    fields.pop("instance_type")
    return fields


def packaged_catalog_path() -> Path:
    return Path(str(resources.files("recommender.decide") / "prices.yaml"))


def load_catalog(path: Path | str | None = None) -> Catalog:
    """Read a catalog: `path` when given, else the refreshed copy in the cwd when present, else the packaged seed."""
    if path is None:
        path = REFRESHED_PATH if REFRESHED_PATH.is_file() else packaged_catalog_path()
    path = Path(path)
    return _catalog_from_document(load_yaml(path, "price catalog", CatalogError), path)


def _catalog_from_document(document: Any, path: Path) -> Catalog:
    try:
        instances = {
            str(name): _priced(InstancePrice(instance_type=str(name), **fields))
            for name, fields in document["instances"].items()
        }
        return Catalog(
            region=_text(document, "region"),
            source=_text(document, "source"),
            retrieved=str(document["retrieved"]),
            instances=instances,
            currency=_text(document, "currency", "USD"),
            path=path,
        )
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise CatalogError(
            f"{path}: price catalog is malformed ({exc!r})",
            hint="it needs region, source, retrieved and instances.<type>.usd_per_hour; "
            "`recommender prices refresh` rewrites it, deleting it brings back the packaged prices",
        ) from exc


def _text(document: dict[str, Any], field: str, default: str | None = None) -> str:
    """A catalog's text field (region, source, currency): a region that is not text would match no instance."""
    value = document[field] if default is None else document.get(field, default)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field} must be text, not {value!r}")
    return value


def _priced(item: InstancePrice) -> InstancePrice:
    price = item.usd_per_hour
    if isinstance(price, bool) or not isinstance(price, (int, float)) or not 0 <= price < float("inf"):
        raise ValueError(f"{item.instance_type}: usd_per_hour must be a number >= 0, not {price!r}")
    return item


def candidate_catalogs() -> list[Catalog]:
    """The refreshed copy in the cwd (when present) first, then the packaged seed."""
    paths = [REFRESHED_PATH] if REFRESHED_PATH.is_file() else []
    return [load_catalog(p) for p in [*paths, packaged_catalog_path()]]


def find_price(
    instance_type: str, region: str = "us-east-1", catalogs: Iterable[Catalog] | None = None
) -> tuple[InstancePrice, Catalog]:
    """The price entry for `instance_type` in `region` and the catalog it came from (for its source and date);
    a CostError naming close matches when unknown."""
    catalogs = list(candidate_catalogs() if catalogs is None else catalogs)
    in_region = [c for c in catalogs if c.region == region]
    if not in_region:
        known = ", ".join(sorted({c.region for c in catalogs})) or "none"
        raise CostError(
            f"no price catalog for region {region} (catalogs cover: {known})",
            hint=f"run `recommender prices refresh --region {region}`, or pass the price with --price",
        )
    for catalog in in_region:
        if instance_type in catalog.instances:
            return catalog.instances[instance_type], catalog
    types = sorted({name for c in in_region for name in c.instances})
    close = difflib.get_close_matches(instance_type, types, n=3, cutoff=0.6)
    suggestion = f"did you mean {', '.join(close)}? " if close else ""
    raise CostError(
        f"no {region} price for instance type {instance_type!r}",
        hint=f"{suggestion}known types: {', '.join(types)}; or pass the price with --price",
    )


def save_catalog(catalog: Catalog, path: Path | str = REFRESHED_PATH) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(catalog.to_document(), sort_keys=False))
    return path


def fetch_prices(
    client: Any, region: str, instance_types: Iterable[str] | None = None, today: date | None = None
) -> Catalog:
    """Read current hosting prices for `region` from the Price List API through a boto3 `pricing` client."""
    wanted = set(instance_types) if instance_types else None
    seed = _seed_hardware()
    instances: dict[str, InstancePrice] = {}
    for product in _hosting_products(client, region):
        item = _instance_price(product, seed)
        if item and (wanted is None or item.instance_type in wanted):
            instances[item.instance_type] = item
    missing = sorted(wanted - instances.keys()) if wanted else []
    if not instances or missing:
        raise CostError(
            f"the AWS Price List API returned no {region} hosting price for "
            f"{', '.join(missing) if missing else 'any instance type'}",
            hint="check the region code and the instance type names (ml.<family>.<size>)",
        )
    stamp = (today or date.today()).isoformat()
    return Catalog(
        region=region,
        retrieved=stamp,
        instances=instances,
        source=f"AWS Price List API (pricing:GetProducts, ServiceCode {SERVICE_CODE}, "
        f"productFamily 'ML Instance', platoinstancetype 'Hosting', on-demand), read {stamp}",
    )


def refresh_prices(
    client: Any,
    region: str,
    instance_types: Iterable[str] | None = None,
    path: Path | str = REFRESHED_PATH,
    today: date | None = None,
) -> Catalog:
    """Fetch current prices and store them, with their date, at `path` (default .recommender/prices.yaml)."""
    catalog = fetch_prices(client, region, instance_types, today=today)
    return replace(catalog, path=save_catalog(catalog, path))


def _hosting_products(client: Any, region: str) -> Iterator[dict[str, Any]]:
    filters = [
        {"Type": "TERM_MATCH", "Field": name, "Value": value}
        for name, value in (*HOSTING_FILTERS, ("regionCode", region))
    ]
    paginator = client.get_paginator("get_products")
    try:
        for page in paginator.paginate(ServiceCode=SERVICE_CODE, Filters=filters, FormatVersion="aws_v1"):
            for raw in page.get("PriceList", []):
                yield json.loads(raw) if isinstance(raw, str) else raw
    except (BotoCoreError, ClientError) as exc:
        raise CostError(
            f"could not read prices from the AWS Price List API: {exc}",
            hint="it needs AWS credentials allowed pricing:GetProducts and network access to "
            "api.pricing.us-east-1.amazonaws.com; the packaged prices stay in use",
        ) from exc


def _instance_price(product: dict[str, Any], seed: dict[str, InstancePrice]) -> InstancePrice | None:
    attributes = product.get("product", {}).get("attributes", {})
    usage = attributes.get("usagetype", "")
    if HOSTING_USAGE_MARK not in usage:
        return None
    name = usage.split(HOSTING_USAGE_MARK, 1)[1]
    usd = _on_demand_hourly_usd(product)
    if usd is None or not name.startswith("ml."):
        return None
    known = seed.get(name)
    if known:  # hardware figures checked by hand against AWS's instance tables win over parsed attributes
        return replace(known, usd_per_hour=usd)
    return InstancePrice(
        instance_type=name,
        usd_per_hour=usd,
        vcpus=_number(attributes.get("vCpu"), int),
        memory_gib=_number(str(attributes.get("memory", "")).split(" ")[0], float),
        gpus=_number(attributes.get("gpu"), int),
        gpu_memory_gib=_gpu_memory(attributes),
    )


def _on_demand_hourly_usd(product: dict[str, Any]) -> float | None:
    for term in product.get("terms", {}).get("OnDemand", {}).values():
        for dimension in term.get("priceDimensions", {}).values():
            usd = _number(dimension.get("pricePerUnit", {}).get("USD"), float)
            if dimension.get("unit") == "Hrs" and usd:
                return usd
    return None


def _gpu_memory(attributes: dict[str, Any]) -> float | None:
    # Assumption: the price list's gpuMemory is per GPU ("16" GiB on each T4); the catalog records the total.
    per_gpu = _number(str(attributes.get("gpuMemory", "")).split(" ")[0], float)
    count = _number(attributes.get("gpu"), int)
    return per_gpu * count if per_gpu is not None and count is not None else None


def _number(text: Any, kind: type) -> Any:
    try:
        return kind(text)
    except (TypeError, ValueError):
        return None


def _seed_hardware() -> dict[str, InstancePrice]:
    return load_catalog(packaged_catalog_path()).instances
