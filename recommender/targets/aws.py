"""boto3 clients for one region (injectable session and endpoint URL, for an emulator), tags, error translation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from recommender.errors import TargetError

TAG_RUN_ID = "recommender:run-id"
TAG_EXPERIMENT = "recommender:experiment"


class AwsClients:
    """Creates boto3 clients lazily (nothing happens in the constructor) and keeps one per service."""

    def __init__(self, region: str, boto_session: Any = None, endpoint_url: str | None = None) -> None:
        self.region = region
        self.boto_session = boto_session
        self.endpoint_url = endpoint_url
        self._clients: dict[str, Any] = {}

    def client(self, service: str) -> Any:
        if service not in self._clients:
            session = self.boto_session
            if session is None:
                import boto3

                session = boto3.Session(region_name=self.region)
            self._clients[service] = session.client(service, region_name=self.region, endpoint_url=self.endpoint_url)
        return self._clients[service]


def run_tags(run_id: str, experiment: str) -> list[dict[str, str]]:
    """The tags every cloud resource of a run carries (SageMaker Key/Value list form)."""
    return [{"Key": TAG_RUN_ID, "Value": run_id}, {"Key": TAG_EXPERIMENT, "Value": experiment}]


def error_code(error: BaseException | None) -> str:
    """The AWS error code of a botocore ClientError ('' for anything else, None included)."""
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


def error_message(error: BaseException | None) -> str:
    response = getattr(error, "response", None) or {}
    return str(response.get("Error", {}).get("Message", "")) or str(error)


def is_not_found(error: BaseException | None) -> bool:
    """SageMaker answers a missing resource with ValidationException 'Could not find ...'; S3 and IAM with codes."""
    code = error_code(error)
    if code in ("404", "NoSuchKey", "NoSuchBucket", "NoSuchEntity", "ResourceNotFound", "RepositoryNotFoundException"):
        return True
    return code == "ValidationException" and "could not find" in error_message(error).lower()


def aws_call(what: str, call: Callable[..., Any], hint: str | None = None, **kwargs: Any) -> Any:
    """Run one AWS API call; turn botocore failures into a TargetError that says what was being done."""
    from boto3.exceptions import Boto3Error
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return call(**kwargs)
    except ClientError as error:
        raise TargetError(
            f"{what} failed: {error_code(error)}: {error_message(error)}", hint=hint or _hint_for(error_code(error))
        ) from error
    except BotoCoreError as error:
        raise TargetError(f"{what} failed: {error}", hint=hint or _hint_for(type(error).__name__)) from error
    except Boto3Error as error:  # e.g. S3UploadFailedError, which wraps the ClientError in its message
        raise TargetError(f"{what} failed: {error}", hint=hint or _hint_for("")) from error


def _hint_for(code: str) -> str:
    if code in (
        "NoCredentialsError",
        "PartialCredentialsError",
        "UnrecognizedClientException",
        "InvalidClientTokenId",
        "ExpiredToken",
        "ExpiredTokenException",
    ):
        return "Configure AWS credentials (aws configure, AWS_PROFILE or the AWS_* environment variables) and retry."
    if code in ("AccessDenied", "AccessDeniedException", "403"):
        return (
            "Your AWS identity lacks a permission for this call; see infra/README.md for the policy the platform needs."
        )
    if code in ("ResourceLimitExceeded", "ThrottlingException"):
        return (
            "Request a SageMaker quota increase for this instance type "
            "or lower target.endpoint_instance_count, then retry."
        )
    if code == "EndpointConnectionError":
        return "Check the region name and your network (or the emulator's endpoint URL)."
    return "See the AWS error above; every resource created so far has been torn down."
