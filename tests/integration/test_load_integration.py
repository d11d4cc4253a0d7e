"""Integration tier: the real Locust child against the null KServe v2 endpoint (loopback only)."""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest

from recommender.errors import LoadError
from recommender.load.null_endpoint import NullEndpoint
from recommender.load.runner import LoadProgress, LoadRequest, LoadResult, run_load
from recommender.spec import Phase

pytestmark = pytest.mark.integration

DELAY_MS = 5
BODIES = [
    {"inputs": [{"name": "INPUT__0", "shape": [1, 4], "datatype": "INT64", "data": [101, 7592, 2088, 102]}]},
    {"inputs": [{"name": "INPUT__0", "shape": [1, 3], "datatype": "INT64", "data": [101, 2088, 102]}]},
]
# 0-3 s: 2 users, +1/s (60 per minute); 3-6 s: 1 user flat.
TWO_PHASES = [
    Phase(initial_users=2, spawn_rate=60, duration_seconds=3),
    Phase(initial_users=1, spawn_rate=0, duration_seconds=3),
]


def locust_children() -> list[psutil.Process]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "locust" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.NoSuchProcess:
            continue
    return found


@pytest.fixture(scope="module")
def slow_endpoint() -> Iterator[str]:
    with NullEndpoint(delay_ms=DELAY_MS) as url:
        yield url


@pytest.fixture(scope="module")
def two_phase_run(
    slow_endpoint: str, tmp_path_factory: pytest.TempPathFactory
) -> tuple[LoadResult, list[LoadProgress], float]:
    updates: list[LoadProgress] = []
    request = LoadRequest(slow_endpoint, "bert", BODIES, TWO_PHASES, tmp_path_factory.mktemp("two_phase"))
    started = time.monotonic()
    result = run_load(request, progress=updates.append)
    return result, updates, time.monotonic() - started


def request_for(endpoint: str, out_dir: Path, phases: list[Phase], **extra: object) -> LoadRequest:
    return LoadRequest(endpoint=endpoint, model_name="bert", bodies=BODIES, phases=phases, out_dir=out_dir, **extra)


def test_users_timeline_follows_the_phases(two_phase_run: tuple[LoadResult, list[LoadProgress], float]) -> None:
    timeline = two_phase_run[0].timeline
    expected = {0: 2, 1: 3, 2: 4, 3: 1, 4: 1, 5: 1}  # sampled mid-second
    seen = {int(t): int(users) for t, users in zip(timeline.t_s, timeline.users, strict=False)}
    assert seen == expected
    assert timeline.target_users.tolist() == list(expected.values())
    assert np.all((timeline.cpu_percent >= 0) & (timeline.cpu_percent <= 100 * psutil.cpu_count()))


def test_requests_carry_the_active_users(two_phase_run: tuple[LoadResult, list[LoadProgress], float]) -> None:
    requests = two_phase_run[0].requests
    assert len(requests) > 100
    assert set(requests.users[requests.t_s < 0.9].tolist()) == {2}
    assert set(requests.users[requests.t_s > 3.2].tolist()) == {1}
    assert np.all(np.diff(requests.t_s) >= 0) and requests.t_s[0] >= 0 and requests.t_s[-1] < 6.5


def test_latencies_are_exact_and_at_least_the_endpoint_delay(
    two_phase_run: tuple[LoadResult, list[LoadProgress], float],
) -> None:
    requests = two_phase_run[0].requests
    assert requests.failures == 0
    assert requests.latency_us.min() >= DELAY_MS * 1000
    assert np.count_nonzero(requests.latency_us % 1000) > 0.9 * len(requests)  # microseconds, not whole milliseconds


def test_run_lasts_the_phases_and_reports_progress(two_phase_run: tuple[LoadResult, list[LoadProgress], float]) -> None:
    result, updates, wall_s = two_phase_run
    assert 6.0 <= result.duration_s < 7.5
    assert abs(result.started_at - time.time()) < 120
    assert wall_s < 6.0 + 10  # start-up and shutdown of the child included
    assert len(updates) >= 4
    assert [u.elapsed_s for u in updates] == sorted(u.elapsed_s for u in updates)
    assert updates[-1].requests == len(result.requests) and updates[-1].total_s == 6.0


def test_failures_are_counted_not_fatal(tmp_path: Path) -> None:
    with NullEndpoint(delay_ms=1, error_share=0.3, seed=7) as url:
        updates: list[LoadProgress] = []
        result = run_load(
            request_for(url, tmp_path, [Phase(initial_users=2, duration_seconds=3)]), progress=updates.append
        )
    share_failed = result.requests.failures / len(result.requests)
    assert 0.2 < share_failed < 0.4
    assert updates[-1].failures == result.requests.failures


def raise_runtime_error(_update: LoadProgress) -> None:
    raise RuntimeError("boom from the progress callback")


def send_sigint_soon(_update: LoadProgress) -> None:
    """Ctrl-C as a terminal delivers it: SIGINT to this (main) process, while run_load is waiting."""
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT)).start()


@pytest.mark.parametrize(
    ("on_progress", "raised"), [(raise_runtime_error, RuntimeError), (send_sigint_soon, KeyboardInterrupt)]
)
def test_interrupt_kills_the_locust_child(
    slow_endpoint: str, tmp_path: Path, on_progress: Callable[[LoadProgress], None], raised: type
) -> None:
    seen: list[psutil.Process] = []

    def progress(update: LoadProgress) -> None:
        if not seen:
            seen.extend(locust_children())
            on_progress(update)

    started = time.monotonic()
    with pytest.raises(raised):
        run_load(request_for(slow_endpoint, tmp_path, [Phase(initial_users=2, duration_seconds=60)]), progress=progress)
    time.sleep(0.5)  # a pending Timer must not outlive the test
    assert time.monotonic() - started < 15
    assert seen and not any(process.is_running() for process in seen)
    assert locust_children() == []


def test_hard_timeout_raises_load_error_and_kills_the_child(slow_endpoint: str, tmp_path: Path) -> None:
    """No slack: Locust's own start-up alone overruns the phases, so the deadline must fire."""
    request = request_for(slow_endpoint, tmp_path, [Phase(initial_users=1, duration_seconds=2)], timeout_slack_s=0)
    with pytest.raises(LoadError, match="did not finish within 2 s") as error:
        run_load(request)
    assert "timeout_slack_s" in error.value.hint
    assert locust_children() == []


def test_child_killed_from_outside_raises_load_error(slow_endpoint: str, tmp_path: Path) -> None:
    def kill_locust(_update: LoadProgress) -> None:
        for process in locust_children():
            process.kill()

    with pytest.raises(LoadError, match="exited with code -9") as error:
        run_load(
            request_for(slow_endpoint, tmp_path, [Phase(initial_users=1, duration_seconds=30)]), progress=kill_locust
        )
    assert "locust.stderr.log" in error.value.hint
    assert locust_children() == []
