"""A Locust user invoking a SageMaker endpoint through boto3 `invoke_endpoint` (SigV4). Loaded ONLY by the Locust child.

Selected by runner.py when the endpoint is `sagemaker://NAME[?region=R&endpoint_url=URL]`, next to locustfile.py
(whose init listener attaches the run state this user records into). Each request is reported to Locust's
request event and into the same exact per-request recorder as the HTTP user (send-to-answer, microseconds).
Never import this module from the main process (Locust's gevent patching).
"""

from __future__ import annotations

import time

import boto3
from botocore.config import Config
from locust import User, constant, events, task

from recommender.load.run_slot import run_of
from recommender.targets.invoke_target import InvokeTarget, parse_invoke_url

CONTENT_TYPE = "application/json"
_MAX_CONNECTIONS = 1000  # one shared client per generator process; every user may hold a connection


class InvocationFailed(Exception):
    """An answer without the KServe v2 "outputs" its request asked for (reported to Locust as the failure reason)."""


def _shared_client(environment, target: InvokeTarget):
    client = getattr(environment, "sagemaker_runtime", None)
    if client is None:
        config = Config(retries={"max_attempts": 1, "mode": "standard"}, max_pool_connections=_MAX_CONNECTIONS)
        client = boto3.Session(region_name=target.region).client(
            "sagemaker-runtime", endpoint_url=target.endpoint_url, config=config
        )
        environment.sagemaker_runtime = client
    return client


class SageMakerUser(User):
    """One closed-loop client: invoke_endpoint, read the answer, invoke again."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.load_run = run_of(self.environment)
        assert self.host is not None  # runner.py always passes --host
        self.target = parse_invoke_url(self.host)
        self.client = _shared_client(self.environment, self.target)

    @task
    def invoke(self) -> None:
        run, users = self.load_run, self.environment.runner.user_count
        content, failure = b"", None
        body, rows, _headers = run.bodies.next()  # JSON: runner.py refuses binary tensors for SageMaker
        sent_ns = time.perf_counter_ns()
        try:
            answer = self.client.invoke_endpoint(
                EndpointName=self.target.endpoint_name,
                ContentType=CONTENT_TYPE,
                Accept=CONTENT_TYPE,
                Body=body,
            )
            content = answer["Body"].read()
        except Exception as error:  # a botocore ClientError, a timeout: the request failed, the user goes on
            failure = error
        done_ns = time.perf_counter_ns()
        if failure is None and (reason := run.judge(200, content, rows)[1]) is not None:
            failure = InvocationFailed(reason)
        events.request.fire(
            request_type="invoke_endpoint",
            name=self.target.endpoint_name,
            response_time=(done_ns - sent_ns) / 1e6,
            response_length=len(content),
            exception=failure,
            context={},
            response=None,
        )
        run.record(sent_ns, done_ns, failure is None, users)
