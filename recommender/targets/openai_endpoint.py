"""An OpenAI-compatible server (Infinity, text-embeddings-inference, vLLM, a hosted API) as a deployment: embeddings,
or generation (chat or completions: `protocol`): readiness, the probe request and the load's path, with
triton_client.py's error policy (every failure one TargetError naming what was asked and where). It keeps no server
statistics: stacks other than Triton expose none the platform reads, so the server figures are left empty and said to
be.

    OpenAIEndpoint(base, model).probe(body) -> the answer, its embeddings checked (rows, numbers)
    OpenAIEndpoint(base, model, protocol=OPENAI_CHAT).probe(body) -> one short completion, not streamed, checked
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from recommender.credentials import open_url
from recommender.errors import TargetError, TargetUnreachable
from recommender.redaction import redact
from recommender.targets.deployment import Deployment
from recommender.targets.triton_client import reason_of, server_message
from recommender.targets.wire import OPENAI, Wire, embeddings_of, generation_problem, openai

HINT = "Check the URL (http://host:port of the server's OpenAI API, with its prefix such as /v1) and the model name."
# said with a 401 / 403: the setting that sends a key
KEY_REFUSED = "an endpoint that takes an API key needs target.api_key_env: the variable holding the key"
READY_PATHS = ("/health", "/models")  # Infinity and TEI answer /health; the OpenAI API itself lists /models
PROBE_TOKENS = 4  # the probe of a generative endpoint: one short completion, not streamed


@dataclass
class OpenAIEndpoint(Deployment):
    """An OpenAI server at `endpoint` (its base URL, the prefix included) serving `model_name` on the wire
    `protocol` names (embeddings by default)."""

    endpoint: str
    model_name: str
    prefix: str = ""  # the part of the URL path the routes sit under (/v1), kept apart for the load's path
    protocol: str = OPENAI  # openai (embeddings), openai-chat or openai-completions (targets/wire.py)
    stream: bool = True  # a generative protocol: the load's answers stream (the probe's never does)
    timeout_s: float = 10.0
    # sent with every request of this process (an API key: `Authorization: Bearer ...`); never printed (repr). The
    # load's processes read the key themselves from `api_key_env` (Deployment): it never crosses Locust's channel
    headers: dict[str, str] = field(default_factory=dict, repr=False)
    # the dtype the engine says it serves at (vLLM: from its start log, targets/vllm.py); None where it does not say
    served_dtype: str | None = None
    host: str = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self.host = self.endpoint.removesuffix(self.prefix) if self.prefix else self.endpoint

    @property
    def wire(self) -> Wire:
        return openai(self.prefix, self.protocol, self.stream)

    @property
    def load_url(self) -> str:
        """The load generator's host: the base URL without the prefix (the wire's path carries it)."""
        return self.host

    def statistics(self) -> dict[str, Any]:
        """None that the platform reads: the server figures of an OpenAI endpoint are left empty."""
        return {}

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict:
        """POST one embeddings request; the answer, which must hold one embedding per input row. A generative
        endpoint: the body as one short completion (at most PROBE_TOKENS tokens, not streamed), which must finish
        with some text."""
        if self.wire.generative:
            return self._probe_generation(body, timeout_s)
        what = f"an embeddings request for model {self.model_name!r}"
        answer = self._call("POST", self.wire.path(self.model_name), what, body, timeout_s)
        try:
            embeddings_of(answer, len(body.get("input", [])))
        except ValueError as error:
            raise TargetError(f"{what} at {self.endpoint}: {error}", hint=self.failure_hint()) from None
        return answer

    def _probe_generation(self, body: dict, timeout_s: float) -> dict:
        what = f"a {self.protocol.removeprefix('openai-')} request for model {self.model_name!r}"
        short = {key: value for key, value in body.items() if key != "stream_options"}
        short |= {"stream": False, "max_tokens": min(int(body.get("max_tokens") or PROBE_TOKENS), PROBE_TOKENS)}
        answer = self._call("POST", self.wire.path(self.model_name), what, short, timeout_s)
        problem = generation_problem(answer, self.protocol)
        if problem is not None:
            raise TargetError(f"{what} at {self.endpoint}: {problem}", hint=self.failure_hint())
        return answer

    def served_models(self) -> list[str] | None:
        """The model ids /models lists, or None when the server has no /models route."""
        try:
            answer = self._call("GET", f"{self.prefix}/models", "the model list", None, self.timeout_s)
        except TargetUnreachable:
            raise
        except TargetError:
            return None
        data = answer.get("data") if isinstance(answer, dict) else None
        return [str(item.get("id")) for item in data if isinstance(item, dict)] if isinstance(data, list) else None

    def check_serves(self) -> None:
        """Preflight: the server answers and, where it lists its models, lists this one."""
        if not self._answers_ready():
            raise TargetUnreachable(f"{self.endpoint} does not answer {' or '.join(READY_PATHS)}", hint=HINT)
        models = self.served_models()
        if models is not None and self.model_name not in models:
            raise TargetError(
                f"{self.endpoint} serves {', '.join(models) or 'no model'}, not {self.model_name!r}",
                hint="set target.model to one of the served model names",
            )

    def failure_hint(self) -> str:
        return super().failure_hint() if self.log_path else HINT

    def _answers_ready(self) -> bool:
        for path in READY_PATHS:
            try:
                self._call("GET", f"{self.prefix}{path}", "readiness", None, 2.0)
                return True
            except TargetError:
                continue
        return False

    def _call(self, method: str, path: str, what: str, body: dict | None, timeout_s: float) -> Any:
        request = urllib.request.Request(
            self.host + path,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Content-Type": "application/json", **self.headers},
            method=method,
        )
        try:
            with open_url(request, timeout_s) as response:  # its key never follows a redirect off this origin
                text = response.read()
        except urllib.error.HTTPError as error:
            message = redact(server_message(error.read())[:500], self._keys())  # a server may echo the key it got
            refused = f" ({KEY_REFUSED})" if error.code in (401, 403) else ""
            raise TargetError(
                f"{what} at {self.endpoint} failed with HTTP {error.code}: {message}{refused}", hint=self.failure_hint()
            ) from error
        except (OSError, urllib.error.URLError) as error:
            raise TargetUnreachable(
                f"{what}: {self.endpoint} does not answer ({reason_of(error)})", hint=self.failure_hint()
            ) from error
        try:
            return json.loads(text) if text.strip() else {}
        except ValueError:
            raise TargetError(
                f"{what} at {self.endpoint} did not answer JSON: "
                f"{redact(text[:200].decode(errors='replace'), self._keys())!r}",
                hint=self.failure_hint(),
            ) from None

    def _keys(self) -> list[str]:
        """The credentials this endpoint sends (each header's value, and a bearer's key alone)."""
        return [part for value in self.headers.values() for part in (value, value.partition(" ")[2]) if part]

    def _stop(self) -> None:
        """Nothing to stop: the endpoint is not ours (a server this platform starts stops in its subclass)."""
