"""Unit tests for the load driver's data: recorder, result file round trip, progress, process isolation."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recommender.errors import LoadError
from recommender.load.recorder import RequestRecorder
from recommender.load.result import LoadProgress, LoadResult
from recommender.load.runner import LoadRequest, run_load
from recommender.metrics.records import RequestLog
from recommender.spec import Phase


@pytest.fixture
def recorder() -> RequestRecorder:
    recorder = RequestRecorder()
    for t_s, latency_us, ok, users in [(0.2, 5100, True, 2), (0.1, 7300, False, 2), (1.4, 5050, True, 3)]:
        recorder.record(t_s, latency_us, ok, users)  # completion order, not send order
    recorder.sample(0.5, 2, 2, 12.5)
    recorder.sample(1.5, 3, 3, 30.0)
    return recorder


def test_recorder_sorts_requests_by_send_time(recorder: RequestRecorder) -> None:
    requests = recorder.result(started_at=1700000000.0, duration_s=2.0).requests
    assert requests.t_s.tolist() == [0.1, 0.2, 1.4]
    assert requests.latency_us.tolist() == [7300, 5100, 5050]
    assert requests.ok.tolist() == [False, True, True]
    assert requests.failures == 1 == recorder.failures


def test_recorder_stays_appendable_after_result(recorder: RequestRecorder) -> None:
    recorder.result(0.0, 1.0)
    recorder.record(2.0, 1, True, 1)
    assert len(recorder) == 4


def test_result_round_trips_through_npz(recorder: RequestRecorder, tmp_path: Path) -> None:
    result = recorder.result(started_at=1700000000.25, duration_s=2.0)
    result.to_npz(tmp_path / "load.npz")
    loaded = LoadResult.from_npz(tmp_path / "load.npz")
    assert loaded.started_at == 1700000000.25 and loaded.duration_s == 2.0
    assert loaded.timeline.users.tolist() == [2, 3] and loaded.timeline.cpu_percent.tolist() == [12.5, 30.0]
    for name, dtype in [("t_s", np.float64), ("latency_us", np.int64), ("ok", np.bool_), ("users", np.int32)]:
        assert getattr(loaded.requests, name).dtype == dtype
        assert np.array_equal(getattr(loaded.requests, name), getattr(result.requests, name))


def test_request_log_round_trips_on_its_own(tmp_path: Path) -> None:
    log = RequestLog(t_s=[0.5], latency_us=[1234], ok=[True], users=[1])
    log.to_npz(tmp_path / "requests.npz")
    assert RequestLog.from_npz(tmp_path / "requests.npz").latency_us.tolist() == [1234]


def test_request_log_rejects_ragged_columns() -> None:
    with pytest.raises(ValueError, match="unequal length"):
        RequestLog(t_s=[0.5, 0.6], latency_us=[1], ok=[True], users=[1])


def test_progress_round_trips_and_tolerates_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "progress.json"
    assert LoadProgress.read(path) is None
    LoadProgress(elapsed_s=1.5, total_s=6.0, users=3, requests=120, failures=2).write(path)
    assert LoadProgress.read(path) == LoadProgress(1.5, 6.0, 3, 120, 2)


def test_main_process_never_imports_locust_or_gevent() -> None:
    """A fresh interpreter, so no other test's imports can hide (or cause) a leak."""
    code = (
        "import sys, recommender.load.runner, recommender.load.null_endpoint;"
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] in ('locust', 'gevent'));"
        "assert not leaked, leaked"
    )
    # from the checkout's root, so this checkout's package is the one imported (not an install made elsewhere)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2])


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"endpoint": "127.0.0.1:8000"}, "not an http"),
        ({"bodies": []}, "no request bodies"),
        ({"phases": []}, "no traffic phases"),
    ],
)
def test_bad_requests_fail_before_starting_locust(tmp_path: Path, changes: dict, message: str) -> None:
    fields = {
        "endpoint": "http://127.0.0.1:1",
        "model_name": "m",
        "bodies": [{"inputs": []}],
        "phases": [Phase()],
        "out_dir": tmp_path,
    }
    with pytest.raises(LoadError, match=message):
        run_load(LoadRequest(**{**fields, **changes}))
    assert not (tmp_path / "locust.stderr.log").exists()
