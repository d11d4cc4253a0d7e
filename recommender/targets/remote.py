"""The `remote` target: benchmark an endpoint that already exists. Nothing is built, deployed or deleted.

The endpoint is a Triton base URL (`http://host:8000`, optionally `.../v2/models/NAME` to pick the model) or
`sagemaker://ENDPOINT_NAME` for an existing SageMaker endpoint (invoked with boto3, CloudWatch metrics collected).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from recommender.errors import TargetError
from recommender.load.invoke_target import SCHEME, InvokeTarget
from recommender.targets.aws import AwsClients, aws_call
from recommender.targets.sagemaker import SageMakerDeployment

DEFAULT_MODEL = "model"


@dataclass
class RemoteTritonDeployment:
    """An existing Triton server; leaving `with` does nothing to it."""

    endpoint: str
    model_name: str
    metrics_url: str | None = None
    log_path: Path | None = None

    def statistics(self) -> dict[str, Any]:
        """Triton's model statistics when the server exposes them to us, else {} (restricted or disabled)."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/v2/models/{self.model_name}/stats", timeout=10) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return {}

    def server_pids(self) -> list[int]:
        return []

    def cloud_metrics(self, start: datetime, end: datetime) -> dict[str, Any]:
        return {}

    def teardown(self) -> None:
        """Nothing to do: the endpoint is not ours."""

    def __enter__(self) -> "RemoteTritonDeployment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


@dataclass
class RemoteSageMakerDeployment:
    """An existing SageMaker endpoint: invoked and measured, never deleted."""

    endpoint_name: str
    clients: AwsClients = field(repr=False)
    variant_name: str = "AllTraffic"
    model_name: str = DEFAULT_MODEL  # not used for routing: the container serves its default model
    metrics_url: str | None = None
    log_path: Path | None = None

    @property
    def endpoint(self) -> str:
        return f"{SCHEME}://{self.endpoint_name}"

    @property
    def invoke_target(self) -> InvokeTarget:
        return InvokeTarget(self.endpoint_name, self.clients.region, self.clients.endpoint_url)

    @property
    def log_group(self) -> str:
        return f"/aws/sagemaker/Endpoints/{self.endpoint_name}"

    def statistics(self) -> dict[str, Any]:
        return {}

    def server_pids(self) -> list[int]:
        return []

    cloud_metrics = SageMakerDeployment.cloud_metrics  # same CloudWatch series, same stored shape

    def teardown(self) -> None:
        """Nothing to do: the endpoint is not ours."""

    def __enter__(self) -> "RemoteSageMakerDeployment":
        return self

    def __exit__(self, *exc: object) -> None:
        self.teardown()


@dataclass
class RemoteTarget:
    """Benchmarks `endpoint` as it is."""

    name: ClassVar[str] = "remote"
    load_shares_host: ClassVar[bool] = False
    deploys: ClassVar[bool] = False
    endpoint: str = ""
    region: str = "us-east-1"
    endpoint_url: str | None = None  # AWS API override for a sagemaker:// endpoint (an emulator)
    boto_session: Any = None

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> "RemoteTarget":
        return cls(endpoint=target.endpoint, region=target.region, endpoint_url=target.endpoint_url)

    def preflight(self) -> None:
        """The endpoint answers: Triton's /v2/health/ready, or DescribeEndpoint InService."""
        if self._is_sagemaker():
            self._check_sagemaker(urlsplit(self.endpoint).netloc)
            return
        base, _ = self._triton_base_and_model()
        try:
            with urllib.request.urlopen(f"{base}/v2/health/ready", timeout=10) as response:
                status = response.status
        except urllib.error.HTTPError as error:
            status = error.code
        except (urllib.error.URLError, OSError) as error:
            raise TargetError(f"remote endpoint {base} does not answer: {error}",
                              hint="Check the URL (http://host:port of Triton's HTTP API) and that the server is running.") from None
        if status != 200:
            raise TargetError(f"remote endpoint {base} is not ready (HTTP {status} on /v2/health/ready)")

    def deploy(self, repository: Path | None, model_name: str, run_dir: Path) -> Any:
        """No deployment: a handle on the existing endpoint (its own model name for Triton URLs ending in /v2/models/NAME)."""
        if self._is_sagemaker():
            return RemoteSageMakerDeployment(urlsplit(self.endpoint).netloc, AwsClients(self.region, self.boto_session, self.endpoint_url))
        base, name = self._triton_base_and_model()
        return RemoteTritonDeployment(base, name or model_name)

    def _is_sagemaker(self) -> bool:
        return self.endpoint.startswith(f"{SCHEME}://")

    def _triton_base_and_model(self) -> tuple[str, str | None]:
        url = urlsplit(self.endpoint)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise TargetError(f"remote endpoint {self.endpoint!r} is neither http(s)://host:port nor sagemaker://NAME")
        parts = [part for part in url.path.split("/") if part]
        name = parts[2] if len(parts) >= 3 and parts[:2] == ["v2", "models"] else None
        return f"{url.scheme}://{url.netloc}", name

    def _check_sagemaker(self, name: str) -> None:
        clients = AwsClients(self.region, self.boto_session, self.endpoint_url)
        found = aws_call(f"DescribeEndpoint {name}", clients.client("sagemaker").describe_endpoint, EndpointName=name)
        if found["EndpointStatus"] != "InService":
            raise TargetError(f"SageMaker endpoint {name} is {found['EndpointStatus']}, not InService")


