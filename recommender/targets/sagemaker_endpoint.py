"""What every SageMaker endpoint deployment shares, deployed by us or existing: how it is reached and measured.

A SageMaker endpoint is not Triton's HTTP API: it is invoked with boto3's sagemaker-runtime `invoke_endpoint`
(SigV4, the target's region, credentials and API URL), Triton's statistics are not exposed through it, and its
figures come from CloudWatch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from recommender.errors import TargetError
from recommender.targets.aws import AwsClients, aws_call
from recommender.targets.deployment import Deployment
from recommender.targets.invoke_target import SCHEME, InvokeTarget


class SageMakerEndpoint(Deployment):
    """A deployment reached through SageMaker's runtime API (subclasses are dataclasses with these fields)."""

    endpoint_name: str
    clients: AwsClients
    variant_name: str

    def __post_init__(self) -> None:
        super().__post_init__()
        self.endpoint = f"{SCHEME}://{self.endpoint_name}"

    @property
    def invoke_target(self) -> InvokeTarget:
        """What the load generator's SageMaker user needs to invoke this endpoint."""
        return InvokeTarget(self.endpoint_name, self.clients.region, self.clients.endpoint_url)

    @property
    def load_url(self) -> str:
        return self.invoke_target.url()

    @property
    def log_group(self) -> str:
        return f"/aws/sagemaker/Endpoints/{self.endpoint_name}"

    def failure_hint(self) -> str:
        return f"Read the container log in CloudWatch ({self.log_group})."

    def statistics(self) -> dict[str, Any]:
        return {}  # Triton's statistics API is not exposed through SageMaker; see cloud_metrics()

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict:
        """One InvokeEndpoint with the JSON body; the answer must be JSON holding `outputs`."""
        runtime = self.clients.client("sagemaker-runtime")
        answer = aws_call(
            f"InvokeEndpoint {self.endpoint_name}",
            runtime.invoke_endpoint,
            EndpointName=self.endpoint_name,
            ContentType="application/json",
            Accept="application/json",
            Body=json.dumps(body).encode(),
        )
        content = answer["Body"].read()
        try:
            parsed = json.loads(content)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict) or not parsed.get("outputs"):
            raise TargetError(
                f"the endpoint's answer to a test request has no outputs: {content[:300]!r}", hint=self.failure_hint()
            )
        return parsed

    def cloud_metrics(self, start: datetime, end: datetime) -> dict[str, Any]:
        """CloudWatch endpoint metrics for the window, as stored data (see `cloudwatch_metrics`)."""
        return {
            "source": "cloudwatch",
            "period_s": 60,
            "start": start.isoformat(),
            "end": end.isoformat(),
            "metrics": {
                name: {
                    "namespace": series.namespace,
                    "statistic": series.statistic,
                    "unit": series.unit,
                    "timestamps": [t.isoformat() for t in series.timestamps],
                    "values": series.values,
                }
                for name, series in cloudwatch_metrics(self, start, end).items()
            },
        }


@dataclass(frozen=True)
class MetricSeries:
    """One CloudWatch metric of an endpoint over time, oldest first."""

    name: str
    namespace: str
    statistic: str
    unit: str
    timestamps: list[datetime]
    values: list[float]


# The endpoint metrics SageMaker publishes: (name, namespace, statistic, unit)
CLOUDWATCH_METRICS = (
    ("ModelLatency", "AWS/SageMaker", "Average", "microseconds"),
    ("OverheadLatency", "AWS/SageMaker", "Average", "microseconds"),
    ("Invocations", "AWS/SageMaker", "Sum", "count"),
    ("CPUUtilization", "/aws/sagemaker/Endpoints", "Average", "percent"),
    ("GPUUtilization", "/aws/sagemaker/Endpoints", "Average", "percent"),
    ("GPUMemoryUtilization", "/aws/sagemaker/Endpoints", "Average", "percent"),
)


def cloudwatch_metrics(
    deployment: SageMakerEndpoint, start: datetime, end: datetime, period_s: int = 60
) -> dict[str, MetricSeries]:
    """Fetch CLOUDWATCH_METRICS for the deployment's endpoint and variant between start and end."""
    dimensions = [
        {"Name": "EndpointName", "Value": deployment.endpoint_name},
        {"Name": "VariantName", "Value": deployment.variant_name},
    ]
    queries: list[dict[str, Any]] = [
        {
            "Id": f"m{index}",
            "ReturnData": True,
            "MetricStat": {
                "Metric": {"Namespace": namespace, "MetricName": name, "Dimensions": dimensions},
                "Period": period_s,
                "Stat": statistic,
            },
        }
        for index, (name, namespace, statistic, _) in enumerate(CLOUDWATCH_METRICS)
    ]
    points: dict[str, dict[datetime, float]] = {query["Id"]: {} for query in queries}
    paginator = deployment.clients.client("cloudwatch").get_paginator("get_metric_data")
    pages = paginator.paginate(MetricDataQueries=queries, StartTime=start, EndTime=end, ScanBy="TimestampAscending")
    for page in aws_call("CloudWatch GetMetricData", lambda: list(pages)):
        for result in page["MetricDataResults"]:
            points[result["Id"]].update(zip(result["Timestamps"], result["Values"], strict=False))
    return {
        name: MetricSeries(
            name,
            namespace,
            statistic,
            unit,
            sorted(points[f"m{i}"]),
            [points[f"m{i}"][t] for t in sorted(points[f"m{i}"])],
        )
        for i, (name, namespace, statistic, unit) in enumerate(CLOUDWATCH_METRICS)
    }
