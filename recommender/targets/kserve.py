"""The KServe v2 HTTP API's paths (Triton's HTTP protocol): the one place they are spelled.

Pure strings, no imports: the Locust child and the null endpoint use it too. Talking to a server is
`recommender.targets.triton_client`'s job.
"""

from __future__ import annotations

HEALTH_READY = "/v2/health/ready"
HEALTH_LIVE = "/v2/health/live"


def model_path(model: str) -> str:
    """`/v2/models/<model>`: the root of one model's API."""
    return f"/v2/models/{model}"


def infer_path(model: str) -> str:
    """Where an inference request for `model` is POSTed."""
    return f"{model_path(model)}/infer"


def model_route(path: str) -> tuple[str, str] | None:
    """(model, rest) of a `/v2/models/<model>[/<rest>]` path, e.g. ('bert', 'infer'); None for any other path."""
    parts = [part for part in path.split("/") if part]
    if len(parts) < 3 or parts[:2] != ["v2", "models"]:
        return None
    return parts[2], "/".join(parts[3:])
