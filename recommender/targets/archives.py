"""The model archives (model.tar.gz) the sagemaker target uploads to S3, as `recommender cleanup` finds them.

The target writes each archive at `<prefix>/<run-id>/<resource name>/model.tar.gz` with the recommender:run-id tag
(sagemaker.py). A run deletes its own on teardown; a run killed with -9 leaves them. Cleanup lists the keys under
`<prefix>/` (under `<prefix>/<run-id>/` with a run id) and deletes only those whose recommender:run-id tag is present
(and equal to the run id when one is given) and that were last modified more than `older_than` ago. An untagged
object under the prefix is never touched. On a versioned bucket (infra/cloudformation.yaml) a delete leaves a
delete marker; the bucket's lifecycle rule expires the old version.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from recommender.targets.aws import TAG_RUN_ID, AwsClients, aws_call


def find_archives(
    clients: AwsClients,
    bucket: str,
    prefix: str,
    run_id: str | None = None,
    older_than: timedelta | None = None,
    now: datetime | None = None,
) -> list[str]:
    """Keys of the tagged archives under the prefix (the run's, when run_id is given) older than `older_than`."""
    cutoff = (now or datetime.now(UTC)) - (older_than or timedelta(0))
    s3 = clients.client("s3")
    scope = f"{prefix.strip('/')}/{run_id + '/' if run_id else ''}"
    return [
        item["Key"]
        for item in _list_objects(s3, bucket, scope)
        if item["LastModified"] <= cutoff and _tagged(s3, bucket, item["Key"], run_id)
    ]


def delete_archives(clients: AwsClients, bucket: str, keys: list[str]) -> None:
    """Delete these keys (a key already gone is not an error: S3's DeleteObject succeeds on a missing key)."""
    s3 = clients.client("s3")
    for key in keys:
        aws_call(f"S3 DeleteObject s3://{bucket}/{key}", s3.delete_object, Bucket=bucket, Key=key)


def _list_objects(s3: Any, bucket: str, prefix: str) -> list[dict[str, Any]]:
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return [
        item
        for page in aws_call(f"S3 ListObjectsV2 s3://{bucket}/{prefix}", lambda: list(pages))
        for item in page.get("Contents", [])
    ]


def _tagged(s3: Any, bucket: str, key: str, run_id: str | None) -> bool:
    answer = aws_call(f"S3 GetObjectTagging s3://{bucket}/{key}", s3.get_object_tagging, Bucket=bucket, Key=key)
    tags = {tag["Key"]: tag["Value"] for tag in answer.get("TagSet", [])}
    return TAG_RUN_ID in tags and (run_id is None or tags[TAG_RUN_ID] == run_id)
