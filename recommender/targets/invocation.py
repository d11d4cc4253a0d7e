"""How the main process talks to a deployment: the URL the load generator is given and one test inference.

http(s) endpoints (Triton's KServe v2 API) are probed with urllib; `sagemaker://NAME` endpoints through boto3's
sagemaker-runtime `invoke_endpoint` (SigV4) with the target's region, credentials and API URL.
"""

from __future__ import annotations

import json
from typing import Any

from recommender.errors import TargetError
from recommender.load.invoke_target import SCHEME, InvokeTarget
from recommender.load.probe import probe_inference
from recommender.targets.aws import aws_call


def is_sagemaker(endpoint: str) -> bool:
    return endpoint.startswith(f"{SCHEME}://")


def load_endpoint(deployment: Any) -> str:
    """What the load generator is pointed at: the HTTP base URL, or sagemaker://NAME?region=..&endpoint_url=.."""
    invoke = getattr(deployment, "invoke_target", None)
    return invoke.url() if isinstance(invoke, InvokeTarget) else deployment.endpoint


def probe(deployment: Any, body: dict, timeout_s: float = 120.0) -> dict:
    """One inference before the load; returns the answer or raises TargetError saying what came back."""
    if not is_sagemaker(deployment.endpoint):
        return probe_inference(deployment.endpoint, deployment.model_name, body, timeout_s)
    runtime = deployment.clients.client("sagemaker-runtime")
    answer = aws_call(f"InvokeEndpoint {deployment.endpoint_name}", runtime.invoke_endpoint,
                      EndpointName=deployment.endpoint_name, ContentType="application/json", Accept="application/json",
                      Body=json.dumps(body).encode())
    content = answer["Body"].read()
    try:
        parsed = json.loads(content)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict) or not parsed.get("outputs"):
        raise TargetError(f"the endpoint's answer to a test request has no outputs: {content[:300]!r}",
                          hint=f"Read the container log in CloudWatch ({getattr(deployment, 'log_group', 'the endpoint log group')}).")
    return parsed
