"""`recommender run` with a remote target: an existing KServe v2 endpoint is benchmarked; nothing is deployed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.load.null_endpoint import NullEndpoint
from recommender.store.results import ResultStore
from recommender.targets.remote import RemoteTarget

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


def test_run_against_an_existing_endpoint(tmp_path) -> None:
    with NullEndpoint(delay_ms=1) as url:
        (tmp_path / "remote.yaml").write_text(
            "name: remote-micro\nvariants: {dynamic_batching: [false]}\ncorrectness: off\n"
            f"target: {{kind: remote, endpoint: '{url}/v2/models/existing'}}\n"
            "traffic: {warmup_seconds: 0, phases: [{initial_users: 2, duration_seconds: 3}]}\n"
        )
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run(
            [sys.executable, "-m", "recommender", "run", "remote.yaml"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("remote-micro")
    assert result.status == "ok", result.reason
    assert result.headline.requests > 0 and result.headline.failures == 0
    assert not list(tmp_path.glob(".recommender/runs/remote-micro/*/repository"))  # nothing built


def test_remote_preflight_names_an_unreachable_endpoint() -> None:
    with pytest.raises(TargetError, match="does not answer"):
        RemoteTarget(endpoint="http://127.0.0.1:9").preflight()
