"""A real run (real Locust against the null KServe endpoint, a remote target) of two levels and two repeats, exported
in AIPerf's format: one folder per level and repeat, numbered by load (not by the order the levels ran in), each
with its level's true concurrency and only its steady-state records (warm-up left out)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.importers.aiperf import read_aiperf
from recommender.load.null_endpoint import NullEndpoint

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]
WARMUP_S, LEVEL_S = 1, 3


def recommender(cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_a_run_of_two_levels_and_two_repeats_exports_four_folders_by_load(tmp_path: Path) -> None:
    with NullEndpoint(delay_ms=1) as url:
        (tmp_path / "levels.yaml").write_text(
            "name: levels\nvariants: {dynamic_batching: [false]}\ncorrectness: off\n"
            f"target: {{kind: remote, endpoint: '{url}/v2/models/existing'}}\n"
            f"traffic: {{warmup_seconds: {WARMUP_S}, window_seconds: 1, repeats: 2, until_known: false,\n"
            f"  concurrency: {{users: [3, 1], duration_seconds: {LEVEL_S}}}}}\n"
        )
        done = recommender(tmp_path, "run", "levels.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    done = recommender(tmp_path, "export", "levels", "--format", "aiperf", "--out", "exported")
    assert done.returncode == 0, done.stdout + done.stderr
    folders = sorted(p.name for p in (tmp_path / "exported").iterdir())
    assert folders == [
        "01-concurrency-1-repeat-1",
        "02-concurrency-1-repeat-2",
        "03-concurrency-3-repeat-1",
        "04-concurrency-3-repeat-2",
    ]  # the 3-user level ran first in each repeat
    counts = {}
    for name in folders:
        users = int(name.split("-")[2])
        aggregate = json.loads((tmp_path / "exported" / name / "profile_export_aiperf.json").read_text())
        assert aggregate["input_config"]["phases"] == [
            {"name": "profiling", "kind": "profiling", "type": "concurrency", "concurrency": users}
        ]
        records = read_aiperf(tmp_path / "exported" / name).records
        assert records.t_s.max() < LEVEL_S - WARMUP_S  # one level, less its first second (its warm-up)
        counts[name] = len(records)
    assert counts["01-concurrency-1-repeat-1"] < counts["03-concurrency-3-repeat-1"]  # 3 users, 1 ms each: more
