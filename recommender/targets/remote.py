"""The `remote` target: benchmark an endpoint that already exists. Nothing is built, deployed or deleted.

The endpoint is a Triton base URL (`http://host:8000`, optionally `.../v2/models/NAME` to pick the model),
`sagemaker://ENDPOINT_NAME` for an existing SageMaker endpoint (invoked with boto3, CloudWatch metrics collected), or
with `protocol: openai` (embeddings), `openai-chat` or `openai-completions` (generation) an OpenAI-compatible server's
base URL (openai_endpoint.py), with the API key that `api_key_env` names sent as a bearer token (read from the
environment at preflight; never stored).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit

from recommender.credentials import api_key, bearer
from recommender.errors import TargetError, TargetUnreachable
from recommender.hardware import Gpu
from recommender.targets import kserve
from recommender.targets.aws import AwsClients, aws_call
from recommender.targets.deployment import Deployment
from recommender.targets.invoke_target import SCHEME
from recommender.targets.openai_endpoint import OpenAIEndpoint
from recommender.targets.sagemaker_endpoint import SageMakerEndpoint
from recommender.targets.triton_client import TritonClient
from recommender.targets.wire import OPENAI_WIRES

DEFAULT_MODEL = "model"
TRITON_URL_HINT = "Check the URL (http://host:port of Triton's HTTP API) and that the server is running."


@dataclass
class RemoteTritonDeployment(Deployment):
    """An existing Triton server; leaving `with` does nothing to it."""

    endpoint: str
    model_name: str

    def statistics(self) -> dict[str, Any]:
        """Triton's model statistics when the server exposes them to us, else {} (restricted or disabled); an
        endpoint that stopped answering (read before and after every load run) is an error, not a refusal."""
        try:
            return super().statistics()
        except TargetUnreachable:
            raise
        except TargetError:
            return {}

    def _stop(self) -> None:
        """Nothing to stop: the endpoint is not ours."""


@dataclass
class RemoteSageMakerDeployment(SageMakerEndpoint):
    """An existing SageMaker endpoint: invoked and measured, never deleted."""

    endpoint_name: str
    clients: AwsClients = field(repr=False)
    variant_name: str = "AllTraffic"
    model_name: str = DEFAULT_MODEL  # not used for routing: the container serves its default model

    def _stop(self) -> None:
        """Nothing to stop: the endpoint is not ours."""


@dataclass
class RemoteTarget:
    """Benchmarks `endpoint` as it is."""

    name: ClassVar[str] = "remote"
    load_shares_host: ClassVar[bool] = False
    deploys: ClassVar[bool] = False
    native_backends: ClassVar[bool] = False  # nothing is built for an existing endpoint
    endpoint: str = ""
    region: str = "us-east-1"
    endpoint_url: str | None = None  # AWS API override for a sagemaker:// endpoint (an emulator)
    boto_session: Any = None
    protocol: str = "kserve"  # kserve (Triton, SageMaker), openai (embeddings), openai-chat or openai-completions
    stream: bool = True  # a generative protocol: answers streamed (server-sent events)
    model: str | None = None  # openai: the served model name
    api_key_env: str | None = None  # openai: the environment variable holding the API key (the key is read at use)

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> RemoteTarget:
        return cls(
            endpoint=target.endpoint,
            region=target.region,
            endpoint_url=target.endpoint_url,
            protocol=target.protocol,
            stream=target.stream,
            model=target.model,
            api_key_env=target.api_key_env,
        )

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        """The endpoint answers: Triton's /v2/health/ready, or DescribeEndpoint InService. An OpenAI endpoint is checked
        per candidate instead (deploy): one that does not answer fails its candidate, and the job goes on."""
        if self.protocol in OPENAI_WIRES:
            self._openai()  # the URL and the model are well formed
            return
        if self._is_sagemaker():
            self._check_sagemaker(urlsplit(self.endpoint).netloc)
            return
        base, name = self._triton_base_and_model()
        server = TritonClient(base, name or DEFAULT_MODEL, hint=TRITON_URL_HINT)
        if not server.server_ready():
            raise TargetError(
                f"remote endpoint {base} is not ready (no HTTP 200 on {kserve.HEALTH_READY})", hint=TRITON_URL_HINT
            )

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> Deployment:
        """No deployment: a handle on the existing endpoint (its own model name for Triton URLs ending in
        /v2/models/NAME); `gpus` is always () (no GPU of this host serves it)."""
        if self.protocol in OPENAI_WIRES:
            endpoint = self._openai()
            endpoint.check_serves()  # answers /health or /models, and lists the model where it lists any
            return endpoint
        if self._is_sagemaker():
            return RemoteSageMakerDeployment(
                urlsplit(self.endpoint).netloc, AwsClients(self.region, self.boto_session, self.endpoint_url)
            )
        base, name = self._triton_base_and_model()
        return RemoteTritonDeployment(base, name or model_name)

    def _openai(self) -> OpenAIEndpoint:
        url = urlsplit(self.endpoint)
        if url.scheme not in ("http", "https") or not url.netloc or not self.model:
            raise TargetError(f"an openai endpoint needs an http(s):// url and a model, not {self.endpoint!r}")
        endpoint = OpenAIEndpoint(
            self.endpoint.rstrip("/"), self.model, url.path.rstrip("/"), self.protocol, self.stream
        )
        if self.api_key_env:
            endpoint.headers = bearer(api_key(self.api_key_env))
            endpoint.api_key_env = self.api_key_env
        return endpoint

    def _is_sagemaker(self) -> bool:
        return self.endpoint.startswith(f"{SCHEME}://")

    def _triton_base_and_model(self) -> tuple[str, str | None]:
        url = urlsplit(self.endpoint)
        if url.scheme not in ("http", "https") or not url.netloc:
            raise TargetError(f"remote endpoint {self.endpoint!r} is neither http(s)://host:port nor sagemaker://NAME")
        route = kserve.model_route(url.path)
        return f"{url.scheme}://{url.netloc}", route[0] if route else None

    def _check_sagemaker(self, name: str) -> None:
        clients = AwsClients(self.region, self.boto_session, self.endpoint_url)
        found = aws_call(f"DescribeEndpoint {name}", clients.client("sagemaker").describe_endpoint, EndpointName=name)
        if found["EndpointStatus"] != "InService":
            raise TargetError(f"SageMaker endpoint {name} is {found['EndpointStatus']}, not InService")
