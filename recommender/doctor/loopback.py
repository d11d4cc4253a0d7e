"""The loopback's speed (`recommender doctor --loopback`): how many requests per second one Locust process of this
host sends to an endpoint that answers at once (load/null_endpoint), over a few seconds.

That rate is the generator's ceiling here: a candidate whose MaxInvocations comes near it is measured on the
generator, not on the server (raise `traffic.workers`, or run workers on other hosts). It is information, never a
blocking check, and it is measured only when asked for: it loads the host's cores for `seconds`.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

from recommender.doctor.check import Check
from recommender.load.null_endpoint import NullEndpoint
from recommender.load.runner import LoadRequest, run_load
from recommender.spec import Phase

USERS = 8  # enough concurrency that the generator, not the round trip, limits the rate
BODY = {"inputs": [{"name": "input_ids", "shape": [1, 4], "datatype": "INT64", "data": [1, 2, 3, 4]}]}
NAME = "loopback (one generator process)"


def loopback_check(seconds: float = 3.0, users: int = USERS) -> Check:
    """Drive the null endpoint for `seconds` with `users` closed-loop users; the rate and median latency seen."""
    with tempfile.TemporaryDirectory(prefix="recommender-loopback-") as folder, NullEndpoint() as url:
        request = LoadRequest(
            url, "model", [BODY], [Phase(initial_users=users, duration_seconds=seconds)], Path(folder)
        )
        result = run_load(request)
    log = result.requests
    answered = int(len(log) - log.failures)
    if answered == 0 or result.duration_s <= 0:
        return Check(NAME, "no request was answered on the loopback", "see `recommender run --help` on traffic", False)
    rate = answered / result.duration_s
    p50_ms = float(np.percentile(log.latency_us[log.ok], 50)) / 1000
    found = (
        f"{rate:,.0f} requests/s at p50 {p50_ms:.2f} ms against an endpoint that answers at once ({users} users, "
        f"{result.duration_s:.1f} s): a candidate near {rate * 60:,.0f} invocations/min per generator process is "
        "limited by the generator (raise traffic.workers)"
    )
    return Check(NAME, found, needed=False)
