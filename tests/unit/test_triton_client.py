"""The Triton client's one error policy, against real HTTP servers on loopback (the null endpoint, a scripted one)."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time

import pytest

from recommender.errors import TargetError
from recommender.targets.triton_client import TritonClient

TOKEN = {"x-recommender-token": "s3cret"}
BODY = {"inputs": [{"name": "input_ids", "shape": [1, 2], "datatype": "INT64", "data": [1, 2]}]}
STATS, INFER = "/v2/models/m/stats", "/v2/models/m/infer"  # spelled here, not taken from recommender.targets.kserve
RESTRICTED = {"error": "This API is restricted, expecting header 'x-recommender-token'"}


def test_null_endpoint_is_ready_and_answers_the_probe(null_endpoint: str) -> None:
    client = TritonClient(null_endpoint, "bert")
    assert client.server_ready() and not client.model_ready()  # it has no model readiness route: 404 is "not ready"
    answer = client.infer(BODY)
    assert answer["model_name"] == "bert" and answer["outputs"][0]["data"] == [0.25, 0.75]


@pytest.mark.parametrize("call", ["statistics", "metadata"])
def test_a_refusal_names_the_call_the_status_and_the_server_message(null_endpoint: str, call: str) -> None:
    client = TritonClient(null_endpoint, "bert", hint="see server.log")
    with pytest.raises(
        TargetError, match=rf"of model 'bert' at {null_endpoint} failed with HTTP 404: not found"
    ) as caught:
        getattr(client, call)()
    assert caught.value.hint == "see server.log"


def test_statistics_send_the_restricted_api_token(scripted) -> None:
    def restricted(headers) -> tuple[int, bytes]:
        allowed = headers.get("x-recommender-token") == TOKEN["x-recommender-token"]
        return (200, b'{"model_stats": [{"name": "m"}]}') if allowed else (403, json.dumps(RESTRICTED).encode())

    url = scripted({STATS: restricted})
    with pytest.raises(TargetError, match="failed with HTTP 403: This API is restricted"):
        TritonClient(url, "m").statistics()
    assert TritonClient(url, "m", headers=TOKEN).statistics() == {"model_stats": [{"name": "m"}]}


@pytest.mark.parametrize(
    ("route", "call", "message"),
    [
        (
            (500, b'{"error": "Failed to process the request(s) for model \'m\'"}'),
            "infer",
            r"a test inference of model 'm' at .* failed with HTTP 500: Failed to process the request\(s\)",
        ),
        ((503, b"upstream unavailable"), "infer", "failed with HTTP 503: upstream unavailable"),
        (
            (200, b'{"model_name": "m", "outputs": []}'),
            "infer",
            "the answer is malformed: expected `outputs` with 1 rows",
        ),
        (
            (200, b'{"outputs": [{"name": "e", "shape": [1, 2], "datatype": "FP32", "data": ["x", 1]}]}'),
            "infer",
            r"the answer is malformed: output 'e' holds values that are not numbers \(\['x', 1\]\)",
        ),
        (
            (200, b'{"outputs": [{"name": "e", "shape": [2, 2], "datatype": "FP32", "data": [1, 2, 3, 4]}]}'),
            "infer",
            r"output 'e' has 2 rows \(shape \[2, 2\]\), the request asked for 1",
        ),
        ((200, b"<html>not json</html>"), "infer", "gave an answer that cannot be read"),
        (
            (502, b"Bad Gateway from the proxy"),
            "statistics",
            "statistics of model 'm' at .* failed with HTTP 502: Bad Gateway from the proxy",
        ),
        (
            (200, b"<html>not json</html>"),
            "statistics",
            "statistics of model 'm': .* gave an answer that cannot be read",
        ),
    ],
)
def test_every_bad_answer_is_a_target_error(scripted, route: tuple[int, bytes], call: str, message: str) -> None:
    path = INFER if call == "infer" else STATS
    client = TritonClient(scripted({path: route}), "m", hint="look at the log")
    with pytest.raises(TargetError, match=message) as caught:
        client.infer(BODY) if call == "infer" else client.statistics()
    assert caught.value.hint == "look at the log"


@pytest.mark.parametrize("call", ["server_ready", "model_ready", "metadata", "statistics", "infer"])
def test_no_answer_is_a_target_error(call: str) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    client = TritonClient(f"http://127.0.0.1:{port}", "m")
    with pytest.raises(TargetError, match=rf"http://127.0.0.1:{port} does not answer \(.*refused"):
        client.infer(BODY) if call == "infer" else getattr(client, call)()


def test_a_server_that_never_answers_times_out() -> None:
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        client = TritonClient(f"http://127.0.0.1:{silent.getsockname()[1]}", "m", timeout_s=0.3)
        with pytest.raises(TargetError, match="does not answer"):
            client.statistics()
        with pytest.raises(TargetError, match="does not answer"):
            client.infer(BODY, timeout_s=0.3)


def test_calls_from_short_lived_threads_leave_no_descriptors_behind(null_endpoint: str) -> None:
    client = TritonClient(null_endpoint, "bert")
    before = len(os.listdir("/proc/self/fd"))
    answers: list[bool] = []
    for _ in range(20):  # the server sampler: a thread of its own per load run
        thread = threading.Thread(target=lambda: answers.append(client.server_ready()))
        thread.start()
        thread.join()
    assert answers == [True] * 20
    assert len(os.listdir("/proc/self/fd")) - before < 10


def test_ctrl_c_always_reaches_the_caller(null_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """gevent runs only in worker threads: in the main thread its hub could swallow Ctrl-C (teardown would be
    skipped). Python itself drops a KeyboardInterrupt raised inside a finalizer or a weakref callback (it reports
    it to sys.unraisablehook): an attempt whose Ctrl-C landed there is Python's rule, not the hub's, and is excused
    (seen once in 25 attempts, in WeakKeyDictionary's callback, on 2026-12-08)."""
    client = TritonClient(null_endpoint, "bert")
    main = threading.main_thread().ident
    dropped: list[BaseException | None] = []
    monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: dropped.append(unraisable.exc_value))
    reached = 0
    for attempt in range(25):
        ctrl_c = threading.Timer(0.02 + 0.004 * attempt, signal.pthread_kill, (main, signal.SIGINT))
        before = len(dropped)
        try:
            ctrl_c.start()
            deadline = time.monotonic() + 10.0
            while time.monotonic() < deadline:
                client.server_ready()
                with pytest.raises(TargetError):
                    client.statistics()
        except KeyboardInterrupt:
            reached += 1
        else:
            assert any(isinstance(e, KeyboardInterrupt) for e in dropped[before:]), f"attempt {attempt}: swallowed"
        ctrl_c.join()
    assert reached >= 20, reached


def test_a_remote_endpoint_that_stops_answering_is_an_error_not_a_refusal() -> None:
    """Statistics a server refuses to show read as {}; an endpoint that does not answer at all fails the run."""
    from recommender.errors import TargetUnreachable
    from recommender.targets.remote import RemoteTritonDeployment

    with pytest.raises(TargetUnreachable, match="does not answer"):
        RemoteTritonDeployment("http://127.0.0.1:9", "model").statistics()
