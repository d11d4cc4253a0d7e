"""Triton's HTTP API as the platform uses it: readiness, model metadata, statistics and the probe inference.

One error policy: every failure (no answer, a refusal, an HTTP error, an answer that cannot be read) is a
TargetError naming what was asked and where, with the HTTP status and the server's own message, and a hint.

Readiness, metadata and statistics go through tritonclient's InferenceServerClient, imported on first use. It
runs on gevent, so each request runs in a short-lived worker thread of its own: a gevent hub in the main thread
can swallow Ctrl-C (raised inside a hub callback or a finalizer), and teardown on Ctrl-C must never be skipped;
the client is not thread-safe either, and the server sampler reads statistics from a thread of its own. The probe
inference is a raw POST of the request body (see `TritonClient.infer`). A `sagemaker://` endpoint is not Triton's
HTTP API: see sagemaker_endpoint.py.
"""

from __future__ import annotations

import contextlib
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from recommender.errors import TargetError, TargetUnreachable
from recommender.targets import kserve
from recommender.targets.wire import KSERVE, answer_problem, rows_asked

DEFAULT_HINT = "Check that the server is running at that address and serves the model (its log says why not)."


@dataclass(frozen=True)
class TritonClient:
    """One model on one Triton server (`endpoint` is its HTTP base URL, e.g. http://127.0.0.1:8000)."""

    endpoint: str
    model_name: str
    headers: Mapping[str, str] = field(
        default_factory=dict, repr=False
    )  # sent with every request (the restricted-API token)
    timeout_s: float = 10.0
    hint: str | Callable[[], str] = (
        DEFAULT_HINT  # where to look when the server fails (a callable, e.g. a log tail, is asked then)
    )

    def server_ready(self) -> bool:
        """Whether the server says it is ready (/v2/health/ready answers 200)."""
        return bool(
            self._request("readiness of the server", lambda client: client.is_server_ready(headers=dict(self.headers)))
        )

    def model_ready(self) -> bool:
        """Whether the server says the model is loaded and ready."""
        return bool(
            self._request(
                f"readiness of model {self.model_name!r}",
                lambda client: client.is_model_ready(self.model_name, headers=dict(self.headers)),
            )
        )

    def ready(self) -> bool:
        """The server and the model are both ready."""
        return self.server_ready() and self.model_ready()

    def metadata(self) -> dict[str, Any]:
        """The model's metadata: name, versions, platform, inputs and outputs (names, datatypes, shapes)."""
        return self._request(
            f"metadata of model {self.model_name!r}",
            lambda client: client.get_model_metadata(self.model_name, headers=dict(self.headers)),
        )

    def statistics(self) -> dict[str, Any]:
        """Triton's statistics JSON of the model (`model_stats`: counts and cumulative times; see
        metrics/triton_stats.py)."""
        return self._request(
            f"statistics of model {self.model_name!r}",
            lambda client: client.get_inference_statistics(self.model_name, headers=dict(self.headers)),
        )

    def infer(self, body: dict, timeout_s: float = 120.0) -> dict:
        """POST one KServe v2 JSON request as it is; the server's JSON answer, which must hold `outputs` with the rows
        the request asked for (wire.answer_problem).

        A raw POST rather than tritonclient's `infer`: the probe sends exactly the bytes the load generator will
        send (JSON tensors, no binary extension, which the null endpoint and other KServe servers need not speak),
        and returns the answer as the server wrote it (tritonclient asks for binary outputs, leaving no `data`).
        """
        what = f"a test inference of model {self.model_name!r}"
        request = urllib.request.Request(
            self.endpoint + kserve.infer_path(self.model_name),
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **self.headers},
        )
        with self._failures(what), urllib.request.urlopen(request, timeout=timeout_s) as response:
            content = response.read()
            answer = json.loads(content)
        problem = answer_problem(KSERVE.answer_key, content, rows_asked(body))
        if problem is not None:  # checked as the load checks every answer: the rows asked for, numbers, one line
            raise TargetError(f"{what} at {self.endpoint}: the answer is malformed: {problem}", hint=self._hint())
        return answer

    def _request(self, what: str, request: Callable[[Any], Any]) -> Any:
        """`request(client)` on a fresh InferenceServerClient, in a worker thread; the caller waits (Ctrl-C
        included)."""
        return _in_worker_thread(lambda: self._send(what, request))

    def _send(self, what: str, request: Callable[[Any], Any]) -> Any:
        from tritonclient.http import InferenceServerClient

        url = urlsplit(self.endpoint)
        with (
            self._failures(what),
            InferenceServerClient(
                url.netloc + url.path.rstrip("/"),
                ssl=url.scheme == "https",
                connection_timeout=self.timeout_s,
                network_timeout=self.timeout_s,
            ) as client,
        ):
            return request(client)

    @contextlib.contextmanager
    def _failures(self, what: str) -> Iterator[None]:
        """Turn whatever the request raised into the one TargetError shape."""
        from tritonclient.utils import InferenceServerException

        try:
            yield
        except urllib.error.HTTPError as error:
            raise self._refused(what, str(error.code), server_message(error.read())) from error
        except InferenceServerException as error:
            raise self._refused(
                what, error.status(), error.debug_details() or error.message()
            ) from error  # details: a non-JSON body
        except (OSError, urllib.error.URLError) as error:
            raise TargetUnreachable(
                f"{what}: {self.endpoint} does not answer ({reason_of(error)})", hint=self._hint()
            ) from error
        except ValueError as error:  # a body that is not JSON, a malformed HTTP answer
            raise TargetError(
                f"{what}: {self.endpoint} gave an answer that cannot be read ({error})", hint=self._hint()
            ) from error

    def _hint(self) -> str:
        return self.hint() if callable(self.hint) else self.hint

    def _refused(self, what: str, status: str | None, message: str | None) -> TargetError:
        code = f"HTTP {status}" if status else "an error"
        return TargetError(
            f"{what} at {self.endpoint} failed with {code}: {(message or 'no message')[:500]}", hint=self._hint()
        )


def _in_worker_thread(call: Callable[[], Any]) -> Any:
    """Run `call` in a daemon thread and wait for it (the wait is interruptible: Ctrl-C leaves the call to time out)."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as error:  # handed to the waiting thread
            outcome["error"] = error
        finally:
            _close_gevent_loop()

    worker = threading.Thread(target=run, name="triton-client", daemon=True)
    worker.start()
    worker.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _close_gevent_loop() -> None:
    """gevent keeps the event loop (two file descriptors) of a thread that used it past the thread's end: close it."""
    import gevent

    gevent.get_hub().destroy(destroy_loop=True)


def server_message(body: bytes) -> str:
    """Triton's `{"error": "..."}`, or the body as text."""
    text = body.decode(errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        return text
    return str(parsed.get("error", text)) if isinstance(parsed, dict) else text


def reason_of(error: BaseException) -> str:
    return str(getattr(error, "reason", None) or error) or type(error).__name__
