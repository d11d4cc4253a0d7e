"""The Target protocol every serving target implements, and the Deployment it returns."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Protocol


class Deployment(Protocol):
    """A running endpoint. Use as a context manager: leaving it always tears the endpoint down."""

    endpoint: str  # base URL of the KServe v2 HTTP API, e.g. http://127.0.0.1:8000, or sagemaker://ENDPOINT_NAME
    model_name: str
    metrics_url: str | None  # Prometheus /metrics, when the target has one
    log_path: Path | None  # the server log, kept in the run directory

    def statistics(self) -> dict[str, Any]: ...  # Triton's /v2/models/<name>/stats JSON

    def server_pids(self) -> list[int]: ...  # the server and every backend stub process

    def cloud_metrics(self, start: datetime, end: datetime) -> dict[str, Any]: ...  # provider metrics for a window ({} if none)

    def teardown(self) -> None: ...

    def __enter__(self) -> "Deployment": ...

    def __exit__(self, *exc: object) -> None: ...


class Target(Protocol):
    """Where candidates are deployed."""

    name: str
    deploys: bool  # False for a target that benchmarks an existing endpoint (no model is built or deployed)
    load_shares_host: bool  # True when the load generator runs on the serving host (one core is left to it)

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> "Target": ...  # from the spec's `target` section

    def preflight(self) -> None: ...  # raises TargetError with a hint when the target cannot work here

    def deploy(self, repository: Path, model_name: str, run_dir: Path) -> Deployment: ...
