"""The `sagemaker` target: real SageMaker endpoints running the Triton container, driven with boto3.

Every resource (S3 object, model, endpoint config, endpoint) carries the run-id and experiment tags,
and a deployment is always torn down: on leaving its `with` block, on errors and on Ctrl-C.
`cleanup()` removes what an interrupted run left behind, found by tag.
"""

from __future__ import annotations

import logging
import re
import secrets
import signal
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlencode

from recommender.errors import Interrupted, TargetError
from recommender.hardware import Gpu
from recommender.targets.aws import TAG_RUN_ID, AwsClients, aws_call, error_code, is_not_found, run_tags
from recommender.targets.base import built
from recommender.targets.sagemaker_endpoint import SageMakerEndpoint
from recommender.targets.sagemaker_packaging import ARCHIVE_NAME, package_repository

log = logging.getLogger(__name__)

TRITON_MODEL_ENV = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
ROLE_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:role/(?:[\w+=,.@-]+/)*(?P<name>[\w+=,.@-]{1,64})$")
IMAGE_URI = re.compile(
    r"^\d{12}\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(?:\.cn)?/[a-z0-9._/-]+(?::[\w.-]+|@sha256:[0-9a-f]{64})$"
)
WAITING_STATUSES = frozenset({"Creating", "Updating", "SystemUpdating"})
TEARDOWN_ORDER = ("endpoint", "endpoint_config", "model", "s3_object")


@dataclass
class SageMakerDeployment(SageMakerEndpoint):
    """A SageMaker endpoint serving one Triton model repository; a context manager that always tears down."""

    endpoint_name: str
    model_name: str  # the Triton model inside the container
    resource_name: str  # name of the SageMaker model and endpoint config
    variant_name: str
    bucket: str
    s3_key: str
    clients: AwsClients = field(repr=False)
    created: set[str] = field(default_factory=set)  # which of TEARDOWN_ORDER exist now

    @property
    def s3_uri(self) -> str:
        return f"s3://{self.bucket}/{self.s3_key}"

    def _stop(self) -> None:
        """Delete endpoint, endpoint config, model and S3 object; raises if any is left (a second call retries
        those)."""
        failures = [problem for kind in TEARDOWN_ORDER if kind in self.created and (problem := self._delete(kind))]
        if failures:
            raise TargetError(
                f"could not delete every resource of endpoint {self.endpoint_name}: {'; '.join(failures)}",
                hint="Run `recommender cleanup` (it finds leftovers by the recommender:run-id tag) "
                "or delete them in the SageMaker console; they are billed while they exist.",
            )

    def _delete(self, kind: str) -> str | None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            _DELETERS[kind](self)
        except ClientError as error:
            if not is_not_found(error):
                return f"{kind}: {error_code(error)}"
        except BotoCoreError as error:
            return f"{kind}: {error}"
        self.created.discard(kind)
        return None


_DELETERS = {
    "endpoint": lambda d: d.clients.client("sagemaker").delete_endpoint(EndpointName=d.endpoint_name),
    "endpoint_config": lambda d: d.clients.client("sagemaker").delete_endpoint_config(
        EndpointConfigName=d.resource_name
    ),
    "model": lambda d: d.clients.client("sagemaker").delete_model(ModelName=d.resource_name),
    "s3_object": lambda d: d.clients.client("s3").delete_object(Bucket=d.bucket, Key=d.s3_key),
}


@dataclass
class SageMakerTarget:
    """Deploys Triton model repositories as SageMaker real-time endpoints."""

    region: str
    role_arn: str
    bucket: str
    instance_type: str
    run_id: str
    experiment: str
    image_uri: str | None = None  # the SageMaker Triton image; looked up with the SageMaker SDK when absent
    triton_version: str | None = None  # for that look-up, e.g. "24.09"
    endpoint_instance_count: int = 1
    ready_timeout_s: float = 1800.0
    poll_interval_s: float = 15.0
    s3_prefix: str = "recommender"
    variant_name: str = "AllTraffic"
    boto_session: Any = None
    endpoint_url: str | None = None  # an emulator (moto server) or a VPC endpoint
    # set when the job stops: an endpoint still starting stops waiting (torn down)
    cancel: threading.Event | None = None
    name: ClassVar[str] = "sagemaker"
    load_shares_host: ClassVar[bool] = False
    deploys: ClassVar[bool] = True
    native_backends: ClassVar[bool] = True  # the Triton image serves the repository with its native backends

    def __post_init__(self) -> None:
        self.clients = AwsClients(self.region, self.boto_session, self.endpoint_url)

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> SageMakerTarget:
        """Built from the experiment file's `target` section (kind: sagemaker)."""
        return cls(
            region=target.region,
            role_arn=target.role_arn,
            bucket=target.bucket,
            instance_type=target.instance_type,
            run_id=run_id,
            experiment=experiment,
            image_uri=target.image_uri,
            endpoint_instance_count=target.endpoint_instance_count,
            ready_timeout_s=target.ready_timeout_seconds,
            endpoint_url=target.endpoint_url,
        )

    def cancel_on(self, event: threading.Event) -> None:
        """An endpoint still starting stops waiting (and is torn down) once `event` is set (the job stops)."""
        self.cancel = event

    def preflight(self) -> None:
        """Credentials, role, bucket and image: raise TargetError with a hint on the first problem."""
        self._check_settings()
        identity = aws_call("STS GetCallerIdentity (credentials check)", self.clients.client("sts").get_caller_identity)
        log.info("AWS identity %s, account %s", identity.get("Arn"), identity.get("Account"))
        self._check_role()
        self._check_bucket()

    def resolve_image_uri(self) -> str:
        """The image URI given, or the SageMaker Triton image for this region from the SageMaker SDK."""
        if self.image_uri:
            return self.image_uri
        try:
            from sagemaker import image_uris  # optional dependency
        except ImportError:
            raise TargetError(
                "no image_uri given and the SageMaker Python SDK is not installed to look it up",
                hint="Pass the SageMaker Triton image URI for your region (see the AWS Deep Learning "
                "Containers list, 'NVIDIA Triton Inference Server'), or `pip install sagemaker`.",
            ) from None
        if not self.triton_version:
            raise TargetError(
                "no image_uri given and no triton_version to look it up",
                hint="Give triton_version (e.g. 24.09) or the full image URI.",
            )
        try:
            return image_uris.retrieve("sagemaker-tritonserver", self.region, version=self.triton_version)
        except ValueError as error:
            raise TargetError(
                f"no SageMaker Triton image for {self.region} version {self.triton_version}: {error}",
                hint="Pick a version the SageMaker SDK lists, or give the full image URI.",
            ) from None

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> SageMakerDeployment:
        """Upload the packaged repository, create model, endpoint config and endpoint, wait for InService; `gpus` is
        always () (the endpoint's instances hold their own GPUs)."""
        image = self.resolve_image_uri()
        archive = package_repository(built(repository), Path(run_dir) / ARCHIVE_NAME, model_name)
        name = resource_name(self.run_id, model_name)
        deployment = SageMakerDeployment(
            endpoint_name=name,
            model_name=model_name,
            resource_name=name,
            variant_name=self.variant_name,
            bucket=self.bucket,
            s3_key=f"{self.s3_prefix}/{self.run_id}/{name}/{ARCHIVE_NAME}",
            clients=self.clients,
        )
        with deployment.starting():
            self._create(deployment, archive, image)
            self._wait_in_service(deployment)
        return deployment

    def cleanup(
        self, older_than: timedelta | None = None, dry_run: bool = False, run_id: str | None = None
    ) -> CleanupReport:
        return cleanup(self.clients, older_than=older_than, dry_run=dry_run, run_id=run_id)

    def _check_settings(self) -> None:
        if not ROLE_ARN.match(self.role_arn):
            raise TargetError(
                f"{self.role_arn!r} is not an IAM role ARN",
                hint="It looks like arn:aws:iam::123456789012:role/RecommenderSageMakerRole "
                "(the RoleArn output of infra/cloudformation.yaml).",
            )
        if not self.instance_type.startswith("ml."):
            raise TargetError(
                f"{self.instance_type!r} is not a SageMaker instance type",
                hint="Use e.g. ml.g5.xlarge or ml.c6i.xlarge.",
            )
        if self.endpoint_instance_count < 1:
            raise TargetError("endpoint_instance_count must be at least 1")
        image_uri = self.resolve_image_uri()
        image = IMAGE_URI.match(image_uri)
        if not image:
            raise TargetError(
                f"{image_uri!r} is not an ECR image URI",
                hint="It looks like <account>.dkr.ecr.<region>.amazonaws.com/<repository>:<tag>.",
            )
        if image.group("region") != self.region:
            raise TargetError(
                f"the image is in {image.group('region')} but endpoints are created in {self.region}",
                hint="SageMaker pulls images from the endpoint's region; use that region's image.",
            )

    def _check_role(self) -> None:
        matched = ROLE_ARN.match(self.role_arn)
        assert matched is not None  # validated when the target was built
        role = matched.group("name")
        try:
            found = aws_call(f"IAM GetRole {role}", self.clients.client("iam").get_role, RoleName=role)
        except TargetError as error:
            if is_not_found(error.__cause__):
                raise TargetError(
                    f"IAM role {role} does not exist",
                    hint="Deploy infra/cloudformation.yaml and pass its RoleArn output.",
                ) from None
            if error_code(error.__cause__) in ("AccessDenied", "AccessDeniedException"):
                log.warning("cannot read IAM role %s (no iam:GetRole permission); not checked", role)
                return
            raise
        if found["Role"]["Arn"] != self.role_arn:
            raise TargetError(
                f"role ARN {self.role_arn} does not match the existing role {found['Role']['Arn']}",
                hint="Copy the role ARN exactly, including its path.",
            )

    def _check_bucket(self) -> None:
        try:
            aws_call(f"S3 HeadBucket {self.bucket}", self.clients.client("s3").head_bucket, Bucket=self.bucket)
        except TargetError as error:
            if is_not_found(error.__cause__):
                raise TargetError(
                    f"S3 bucket {self.bucket} does not exist",
                    hint="Deploy infra/cloudformation.yaml and pass its BucketName output.",
                ) from None
            raise

    def _create(self, deployment: SageMakerDeployment, archive: Path, image: str) -> None:
        tags = run_tags(self.run_id, self.experiment)
        sagemaker, name = self.clients.client("sagemaker"), deployment.resource_name
        deployment.created.add("s3_object")
        aws_call(
            f"upload of {archive} to {deployment.s3_uri}",
            self.clients.client("s3").upload_file,
            Filename=str(archive),
            Bucket=self.bucket,
            Key=deployment.s3_key,
            ExtraArgs={"Tagging": urlencode({t["Key"]: t["Value"] for t in tags})},
        )
        deployment.created.add("model")
        aws_call(
            f"CreateModel {name}",
            sagemaker.create_model,
            ModelName=name,
            ExecutionRoleArn=self.role_arn,
            Tags=tags,
            PrimaryContainer={
                "Image": image,
                "ModelDataUrl": deployment.s3_uri,
                "Environment": {TRITON_MODEL_ENV: deployment.model_name},
            },
        )
        deployment.created.add("endpoint_config")
        aws_call(
            f"CreateEndpointConfig {name}",
            sagemaker.create_endpoint_config,
            EndpointConfigName=name,
            Tags=tags,
            ProductionVariants=[
                {
                    "VariantName": self.variant_name,
                    "ModelName": name,
                    "InstanceType": self.instance_type,
                    "InitialInstanceCount": self.endpoint_instance_count,
                    "InitialVariantWeight": 1.0,
                }
            ],
        )
        deployment.created.add("endpoint")
        aws_call(
            f"CreateEndpoint {name}", sagemaker.create_endpoint, EndpointName=name, EndpointConfigName=name, Tags=tags
        )

    def _wait_in_service(self, deployment: SageMakerDeployment) -> None:
        deadline = time.monotonic() + self.ready_timeout_s
        describe = self.clients.client("sagemaker").describe_endpoint
        while True:
            status = aws_call(
                f"DescribeEndpoint {deployment.endpoint_name}", describe, EndpointName=deployment.endpoint_name
            )
            state = status["EndpointStatus"]
            if state == "InService":
                return
            if state not in WAITING_STATUSES:
                raise TargetError(
                    f"endpoint {deployment.endpoint_name} is {state}: {status.get('FailureReason', 'no reason given')}",
                    hint=f"Read the container log in CloudWatch ({deployment.log_group}); the endpoint was torn down.",
                )
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TargetError(
                    f"endpoint {deployment.endpoint_name} still {state} after {self.ready_timeout_s:.0f} s",
                    hint="Raise ready_timeout_s (large models and GPU instances take 10+ minutes); it was torn down.",
                )
            if self.cancel is None:
                time.sleep(min(self.poll_interval_s, remaining))
            elif self.cancel.wait(min(self.poll_interval_s, remaining)):
                raise Interrupted(signal.SIGINT)  # the job stopped: deploy's `starting()` tears the endpoint down


def resource_name(run_id: str, model_name: str) -> str:
    """A SageMaker-valid name (letters, digits, hyphens, at most 63) unique per deployment."""
    base = re.sub(r"[^A-Za-z0-9]+", "-", f"rec-{run_id}-{model_name}").strip("-")[:56].rstrip("-")
    return f"{base}-{secrets.token_hex(3)}"


@dataclass
class CleanupReport:
    """What `cleanup` deleted (or, with dry_run, would delete), by resource kind."""

    dry_run: bool
    endpoints: list[str] = field(default_factory=list)
    endpoint_configs: list[str] = field(default_factory=list)
    models: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.endpoints) + len(self.endpoint_configs) + len(self.models)


# kind -> (list operation, result key, name key, arn key, delete operation, delete parameter)
_CLEANUP_KINDS = (
    ("endpoints", "list_endpoints", "Endpoints", "EndpointName", "EndpointArn", "delete_endpoint", "EndpointName"),
    (
        "endpoint_configs",
        "list_endpoint_configs",
        "EndpointConfigs",
        "EndpointConfigName",
        "EndpointConfigArn",
        "delete_endpoint_config",
        "EndpointConfigName",
    ),
    ("models", "list_models", "Models", "ModelName", "ModelArn", "delete_model", "ModelName"),
)


def cleanup(
    clients: AwsClients,
    older_than: timedelta | None = None,
    dry_run: bool = False,
    run_id: str | None = None,
    now: datetime | None = None,
) -> CleanupReport:
    """Delete endpoints, endpoint configs and models tagged recommender:run-id (one run's, or any run's)
    created more than `older_than` ago (any age when None). Untagged resources are never touched."""
    cutoff = (now or datetime.now(UTC)) - (older_than or timedelta(0))
    sagemaker = clients.client("sagemaker")
    report = CleanupReport(dry_run=dry_run)
    for kind, lister, key, name_key, arn_key, deleter, parameter in _CLEANUP_KINDS:
        for item in _list_all(sagemaker, lister, key):
            if item["CreationTime"] > cutoff or not _tagged(sagemaker, item[arn_key], run_id):
                continue
            if not dry_run:
                _delete_if_present(
                    getattr(sagemaker, deleter), f"{deleter} {item[name_key]}", **{parameter: item[name_key]}
                )
            getattr(report, kind).append(item[name_key])
    return report


def _list_all(sagemaker: Any, operation: str, key: str) -> list[dict[str, Any]]:
    pages = sagemaker.get_paginator(operation).paginate()
    return [item for page in aws_call(f"SageMaker {operation}", lambda: list(pages)) for item in page[key]]


def _tagged(sagemaker: Any, arn: str, run_id: str | None) -> bool:
    tags = {
        t["Key"]: t["Value"] for t in aws_call(f"ListTags {arn}", sagemaker.list_tags, ResourceArn=arn).get("Tags", [])
    }
    return TAG_RUN_ID in tags and (run_id is None or tags[TAG_RUN_ID] == run_id)


def _delete_if_present(call: Any, what: str, **kwargs: Any) -> None:
    try:
        aws_call(what, call, **kwargs)
    except TargetError as error:
        if not is_not_found(error.__cause__):
            raise
