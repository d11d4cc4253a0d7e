"""Where a SageMaker endpoint is invoked: its name, region and API URL, written into and read from a load URL.

Shared by the main process (which writes `sagemaker://NAME?region=..&endpoint_url=..`) and the Locust child (which
reads it); no boto3 or Locust import here.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

SCHEME = "sagemaker"


@dataclass(frozen=True)
class InvokeTarget:
    endpoint_name: str
    region: str | None = None
    endpoint_url: str | None = None  # an emulator or VPC endpoint; None for the public AWS endpoint

    def url(self) -> str:
        query = urlencode({k: v for k, v in (("region", self.region), ("endpoint_url", self.endpoint_url)) if v})
        return f"{SCHEME}://{self.endpoint_name}" + (f"?{query}" if query else "")


def parse_invoke_url(url: str) -> InvokeTarget:
    """`sagemaker://NAME?region=R&endpoint_url=URL` -> InvokeTarget; ValueError for anything else."""
    parts = urlsplit(url)
    if parts.scheme != SCHEME or not parts.netloc:
        raise ValueError(f"{url!r} is not {SCHEME}://ENDPOINT_NAME")
    query = {key: values[-1] for key, values in parse_qs(parts.query).items()}
    return InvokeTarget(parts.netloc, query.get("region"), query.get("endpoint_url"))
