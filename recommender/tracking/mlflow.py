"""An experiment's candidates as MLflow runs, over MLflow's REST API (no `mlflow` package in recommender's
environment: the tracking server runs wherever the team keeps it, its own pins apart).

    export_to_mlflow(uri, records, artifacts)  -> one ExportedRun per candidate

One MLflow experiment per recommender experiment (same name), one MLflow run per candidate, found again by its tag
`recommender.key`: exporting again updates that run, never makes a second. Params: the candidate's configuration
and target. Metrics: the figures of the report row (metric catalog names, report/columns.py), the percentile
latencies, the error rate, the interval bounds, the score and rank, `within_limits` (1 ranked, 0 excluded); the
per-window series as step metrics (`window_invocations_per_minute`, `window_latency_<p>_ms`, step = the window's
place in time order). All are logged at the run's end time, so a second export writes the same rows again, which
MLflow keeps once. Tags: the experiment, the target, the status and, for an excluded candidate, why. Artifacts (the
report, the deliverable) are uploaded through the server's artifact proxy (`mlflow server` serves artifacts by
default), overwriting what an earlier export put there.

Authentication is MLflow's own: MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (basic auth, e.g. `mlflow server
--app-name basic-auth`), else MLFLOW_TRACKING_TOKEN (a bearer token), else a user:password@ in the URI, in MLflow's
client's order. The credential goes in the Authorization header of each call, never to another origin on a redirect
(credentials.open_url), and never into a message (the URI is kept and shown without its user part).
"""

from __future__ import annotations

import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from recommender.credentials import basic, bearer, open_url, without_userinfo
from recommender.errors import InputError, TrackingError

KEY_TAG = "recommender.key"
_BATCH = {"metrics": 1000, "params": 100, "tags": 100}  # MLflow's per-request limits of log-batch
_PARAM_CHARS = 6000  # MLflow's limit on a param value
USERNAME, PASSWORD, TOKEN = "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN"
AUTH_HINT = (
    f"a tracking server that asks for credentials takes MLflow's own: export {USERNAME} and {PASSWORD} (basic auth) "
    f"or {TOKEN} (a bearer token)"
)


@dataclass(frozen=True)
class CandidateRecord:
    """What one candidate's MLflow run holds."""

    key: str
    name: str
    params: Mapping[str, str]
    metrics: Mapping[str, float]
    # step metrics, step = the window's place in time order (None: that window has no value, and no step is logged)
    series: Mapping[str, tuple[float | None, ...]] = field(default_factory=dict)
    tags: Mapping[str, str] = field(default_factory=dict)
    end_ms: int = 0  # the run's end (epoch ms): every value is logged at it, so a second export repeats, not adds
    failed: bool = False  # the candidate's run failed: the MLflow run ends FAILED


@dataclass(frozen=True)
class ExportedRun:
    name: str
    run_id: str
    created: bool  # False: an earlier export's run, updated


class MlflowClient:
    """The few REST calls an export makes (API 2.0, which MLflow 2 and 3 serve)."""

    def __init__(self, uri: str, timeout_s: float = 30.0) -> None:
        parsed = urllib.parse.urlsplit(uri)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise TrackingError(
                f"MLflow tracking URI {uri!r} is not an http(s) address",
                hint="give the tracking server's address, e.g. --mlflow http://127.0.0.1:5000",
            )
        plain, user, password = without_userinfo(uri.rstrip("/"))
        self.uri, self.timeout_s = plain, timeout_s
        self.auth = authorization(user, password)

    def call(self, method: str, path: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body).encode()
        return json.loads(self._send(method, f"/api/2.0/mlflow/{path}", data, "application/json") or b"{}")

    def _send(self, method: str, path: str, data: bytes | None, content_type: str) -> bytes:
        request = urllib.request.Request(self.uri + path, data=data, method=method)
        request.add_header("Content-Type", content_type)
        for name, value in self.auth.items():
            request.add_header(name, value)
        try:
            with open_url(request, self.timeout_s) as answer:
                return answer.read()
        except urllib.error.HTTPError as error:
            said = error.read()[:500].decode(errors="replace")
            raise TrackingError(
                f"MLflow at {self.uri} refused {method} {path}: HTTP {error.code} {said}",
                hint=AUTH_HINT if error.code in (401, 403) else "check the tracking URI and the server's log",
            ) from error
        except (urllib.error.URLError, OSError) as error:
            reason = getattr(error, "reason", error)
            raise TrackingError(
                f"MLflow at {self.uri} cannot be reached: {reason}",
                hint="start the tracking server (mlflow server --host 127.0.0.1 --port 5000) or fix the URI",
            ) from error

    def experiment_id(self, name: str) -> str:
        """The MLflow experiment named `name`, created when there is none."""
        query = urllib.parse.urlencode({"experiment_name": name})
        try:
            return str(self.call("GET", f"experiments/get-by-name?{query}")["experiment"]["experiment_id"])
        except TrackingError as error:
            if "RESOURCE_DOES_NOT_EXIST" not in error.message:
                raise
        return str(self.call("POST", "experiments/create", {"name": name})["experiment_id"])

    def find_run(self, experiment_id: str, key: str) -> str | None:
        """The run an earlier export made for the candidate `key`, if any."""
        found = self.call(
            "POST",
            "runs/search",
            {"experiment_ids": [experiment_id], "filter": f"tags.`{KEY_TAG}` = '{key}'", "max_results": 1},
        )
        runs = found.get("runs") or []
        return str(runs[0]["info"]["run_id"]) if runs else None

    def create_run(self, experiment_id: str, name: str, start_ms: int, tags: Mapping[str, str]) -> str:
        body = {"experiment_id": experiment_id, "run_name": name, "start_time": start_ms, "tags": _pairs(tags)}
        return str(self.call("POST", "runs/create", body)["run"]["info"]["run_id"])

    def log_batch(self, run_id: str, metrics: list[dict], params: list[dict], tags: list[dict]) -> None:
        """Everything in as few log-batch calls as MLflow's limits allow."""
        while metrics or params or tags:
            chunk = {
                "metrics": metrics[: _BATCH["metrics"]],
                "params": params[: _BATCH["params"]],
                "tags": tags[: _BATCH["tags"]],
            }
            self.call("POST", "runs/log-batch", {"run_id": run_id, **chunk})
            metrics, params, tags = (
                metrics[_BATCH["metrics"] :],
                params[_BATCH["params"] :],
                tags[_BATCH["tags"] :],
            )

    def upload(self, experiment_id: str, run_id: str, path: str, content: bytes) -> None:
        """An artifact at `path` of the run, through the server's artifact proxy (overwrites)."""
        where = f"/api/2.0/mlflow-artifacts/artifacts/{experiment_id}/{run_id}/artifacts/{urllib.parse.quote(path)}"
        self._send("PUT", where, content, "application/octet-stream")

    def finish(self, run_id: str, end_ms: int, failed: bool) -> None:
        body = {"run_id": run_id, "status": "FAILED" if failed else "FINISHED", "end_time": end_ms}
        self.call("POST", "runs/update", body)


def authorization(uri_user: str | None, uri_password: str | None) -> dict[str, str]:
    """The Authorization header MLflow's own client would send: basic auth from MLFLOW_TRACKING_USERNAME and
    MLFLOW_TRACKING_PASSWORD, else the bearer MLFLOW_TRACKING_TOKEN, else basic auth from the URI's user:password@;
    {} for none. A username without its password (or the reverse) is an InputError naming both variables."""
    user, password, token = (os.environ.get(name, "") for name in (USERNAME, PASSWORD, TOKEN))
    if bool(user) != bool(password):
        given, missing = (USERNAME, PASSWORD) if user else (PASSWORD, USERNAME)
        raise InputError(
            f"{given} is set but {missing} is not: MLflow's basic auth needs both",
            hint=f"export {missing} as well, or unset {given} (MLFLOW_TRACKING_TOKEN for a bearer token)",
        )
    if user:
        return basic(user, password)
    if token:
        return bearer(token)
    if uri_user is not None:
        return basic(uri_user, uri_password or "")
    return {}


def export_to_mlflow(
    uri: str,
    experiment: str,
    records: list[CandidateRecord],
    artifacts: Mapping[str, bytes] | None = None,
    run_artifacts: Mapping[str, Mapping[str, bytes]] | None = None,
) -> list[ExportedRun]:
    """One MLflow run per record in the MLflow experiment `experiment`; `artifacts` go to every run, `run_artifacts`
    (by candidate key) to that candidate's run only."""
    client = MlflowClient(uri)
    experiment_id = client.experiment_id(experiment)
    exported = []
    for record in records:
        run_id = client.find_run(experiment_id, record.key)
        created = run_id is None
        tags = {KEY_TAG: record.key, "mlflow.runName": record.name, **record.tags}
        if run_id is None:
            run_id = client.create_run(experiment_id, record.name, record.end_ms, tags)
        client.log_batch(run_id, _metrics(record), _pairs(record.params, _PARAM_CHARS), _pairs(tags))
        for path, content in {**(artifacts or {}), **(run_artifacts or {}).get(record.key, {})}.items():
            client.upload(experiment_id, run_id, path, content)
        client.finish(run_id, record.end_ms, record.failed)
        exported.append(ExportedRun(record.name, run_id, created))
    return exported


def _metrics(record: CandidateRecord) -> list[dict]:
    at = record.end_ms
    rows = [{"key": k, "value": v, "timestamp": at, "step": 0} for k, v in record.metrics.items() if _finite(v)]
    for key, values in record.series.items():
        rows += [{"key": key, "value": v, "timestamp": at, "step": i} for i, v in enumerate(values) if _finite(v)]
    return rows


def _finite(value: float | None) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _pairs(values: Mapping[str, str], limit: int = 5000) -> list[dict]:
    return [{"key": key, "value": str(value)[:limit]} for key, value in values.items()]
