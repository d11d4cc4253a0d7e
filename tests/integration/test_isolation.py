"""Generator and server on disjoint CPUs (traffic.generator_cpus) on the real tritonserver and Locust child."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

from recommender.candidates import Candidate
from recommender.errors import LoadError
from recommender.load.isolation import split_cpus
from recommender.measurement.repeats import measure
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import ExperimentSpec
from recommender.targets.local import LocalTarget

pytestmark = pytest.mark.integration

BODIES = [
    {
        "inputs": [
            {"name": "input_ids", "shape": [1, 5], "datatype": "INT64", "data": [3, 7, 11, 2, 9]},
            {"name": "attention_mask", "shape": [1, 5], "datatype": "INT64", "data": [1, 1, 1, 1, 1]},
        ]
    }
]
CPUS = sorted(os.sched_getaffinity(0))


@pytest.fixture
def deployment(tmp_path: Path, artifacts):
    repository = write_model_repository(Candidate("onnx", None, 1, 4, "local"), artifacts["onnx"], tmp_path / "repo")
    with LocalTarget(ready_timeout=120).deploy(repository, "model", tmp_path / "run") as deployed:
        yield deployed


@pytest.mark.skipif(len(CPUS) < 2, reason="needs 2 CPUs to split")
def test_server_threads_pinned_away_from_the_generator_and_the_split_recorded(deployment, tmp_path: Path) -> None:
    generator, server = CPUS[-1:], CPUS[:-1]
    spec = ExperimentSpec.model_validate(
        {
            "name": "isolation",
            "traffic": {
                "warmup_seconds": 1,
                "window_seconds": 1.5,
                "generator_cpus": generator,
                "concurrency": {"users": [2], "duration_seconds": 4},
            },
            "latency_threshold": {"percentile": "p90", "ms": 2000},
        }
    )
    m = measure(deployment, spec, BODIES, tmp_path)
    recorded = m.server_stats["generator"]
    assert recorded["generator_cpus"] == generator and recorded["server_cpus"] == server
    assert recorded["server_threads_pinned"] > 0
    threads = [t.id for pid in deployment.server_pids() for t in psutil.Process(pid).threads()]
    assert threads and {frozenset(os.sched_getaffinity(t)) for t in threads} == {frozenset(server)}
    assert m.headline.max_invocations > 0


def test_a_cpu_this_process_may_not_use_is_a_clear_error() -> None:
    with pytest.raises(LoadError, match=r"traffic.generator_cpus names CPU 4096"):
        split_cpus([4096])
