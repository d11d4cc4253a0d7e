"""The Deployment base class: the lifecycle every target's deployment inherits, against real HTTP servers on
loopback."""

from __future__ import annotations

import os
import signal
from dataclasses import dataclass, field

import pytest

from recommender.errors import Interrupted, TargetError, interruption_reason
from recommender.targets.deployment import Deployment
from tests.unit.test_triton_client import BODY


@dataclass
class Recorded(Deployment):
    """A deployment whose stop is recorded (and can fail, or be interrupted by Ctrl-C)."""

    endpoint: str
    model_name: str = "m"
    stops: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)  # each stop raises the next of these
    interrupt: bool = False

    def _stop(self) -> None:
        self.stops.append("stop")
        if self.interrupt:
            os.kill(os.getpid(), signal.SIGINT)
        if self.failures:
            raise TargetError(self.failures.pop(0))


def test_leaving_with_tears_down_once() -> None:
    deployment = Recorded("http://127.0.0.1:9")
    with pytest.raises(RuntimeError), deployment:
        raise RuntimeError("load crashed")
    deployment.teardown()
    assert deployment.stops == ["stop"]
    assert deployment.server_pids() == [] and deployment.cloud_metrics(None, None) == {}


def test_a_failed_teardown_is_tried_again() -> None:
    deployment = Recorded("http://127.0.0.1:9", failures=["container still there"])
    with pytest.raises(TargetError, match="container still there"):
        deployment.teardown()
    deployment.teardown()
    deployment.teardown()
    assert deployment.stops == ["stop", "stop"]


@pytest.mark.parametrize("failure", [TargetError("model failed to load"), KeyboardInterrupt()])
def test_a_failed_start_tears_down_and_keeps_its_error_with_the_teardown_failure_noted(failure: BaseException) -> None:
    deployment = Recorded("http://127.0.0.1:9", failures=["could not delete the endpoint"])
    with pytest.raises(type(failure)) as caught, deployment.starting():
        raise failure
    assert caught.value is failure and deployment.stops == ["stop"]
    assert caught.value.__notes__ == ["teardown also failed: could not delete the endpoint"]


def test_ctrl_c_waits_for_the_teardown_to_finish() -> None:
    deployment = Recorded("http://127.0.0.1:9", interrupt=True)
    with pytest.raises(KeyboardInterrupt):
        deployment.teardown()
    assert deployment.stops == ["stop"]
    deployment.interrupt = False
    deployment.teardown()  # it finished before Ctrl-C was raised: nothing left to stop
    assert deployment.stops == ["stop"]


def test_wait_until_ready_polls_server_and_model(scripted) -> None:
    ready = scripted({"/v2/health/ready": (200, b""), "/v2/models/m/ready": (200, b"")})
    Recorded(ready).wait_until_ready(timeout_s=5)
    loading = scripted({"/v2/health/ready": (200, b"")})
    with pytest.raises(TargetError, match=r"'m' was not ready after 0 s"):
        Recorded(loading).wait_until_ready(timeout_s=0.3, poll_s=0.05)


def test_probe_and_statistics_go_through_triton(null_endpoint: str) -> None:
    deployment = Recorded(null_endpoint, model_name="bert")
    assert deployment.probe(BODY)["outputs"] and deployment.load_url == null_endpoint
    with pytest.raises(TargetError, match="HTTP 404"):
        deployment.statistics()


@pytest.fixture
def sigterm_interrupts():
    """SIGTERM raising errors.Interrupted, as the CLI installs it."""

    def interrupt(signum, frame):
        raise Interrupted(signum)

    previous = signal.signal(signal.SIGTERM, interrupt)
    yield
    signal.signal(signal.SIGTERM, previous)


@dataclass
class Terminated(Recorded):
    """A deployment whose stop receives SIGTERM (twice) while it runs."""

    def _stop(self) -> None:
        os.kill(os.getpid(), signal.SIGTERM)
        os.kill(os.getpid(), signal.SIGTERM)
        super()._stop()


def test_sigterm_waits_for_the_teardown_then_reaches_the_previous_handler(sigterm_interrupts) -> None:
    deployment = Terminated("http://127.0.0.1:9")
    with pytest.raises(Interrupted) as caught:
        deployment.teardown()
    assert deployment.stops == ["stop"] and caught.value.signum == signal.SIGTERM and caught.value.exit_code == 143


def test_a_failing_teardown_never_hides_the_interruption() -> None:
    deployment = Recorded("http://127.0.0.1:9", failures=["tritonserver processes still running"])
    with pytest.raises(Interrupted) as caught, deployment:
        raise Interrupted(signal.SIGHUP)
    assert caught.value.__notes__ == ["teardown also failed: tritonserver processes still running"]
    assert interruption_reason(caught.value) == "interrupted by SIGHUP"
    assert interruption_reason(KeyboardInterrupt()) == "interrupted by the user (Ctrl-C)"


def test_a_failing_teardown_after_a_clean_block_is_raised() -> None:
    with (
        pytest.raises(TargetError, match="container still there"),
        Recorded("http://127.0.0.1:9", failures=["container still there"]),
    ):
        pass
