"""benchmarks/peer_model_analyzer.py reads Model Analyzer's own inference table and its generated configs (real
layout)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from peer_model_analyzer import _pick

# The header and rows as Model Analyzer 1.58 wrote them (quick search of a 1-layer BERT on this 2-core host).
TABLE = """Model,Batch,Concurrency,Model Config Path,Instance Group,Max Batch Size,Satisfies Constraints,\
Throughput (infer/sec),p95 Latency (ms)
model,1,4,model_config_2,1:CPU,2,Yes,1205.8,5.9
model,1,16,model_config_default,1:CPU,8,No,1898.8,122.3
model,1,4,model_config_3,2:CPU,4,Yes,1093.7,7.3
model,1,1,model_config_default,1:CPU,8,Yes,592.0,2.3
"""


def configs(tmp_path: Path) -> Path:
    for name, batching in (
        ("model_config_2", "dynamic_batching {\n}\n"),
        ("model_config_3", "dynamic_batching {\n}\n"),
        ("model_config_default", ""),
    ):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "config.pbtxt").write_text(f'name: "model"\nmax_batch_size: 2\n{batching}')
    return tmp_path / "models"


def test_the_pick_is_the_fastest_measurement_within_the_constraint(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TABLE)
    found = _pick(354.0, tmp_path / "t.csv", configs(tmp_path))
    assert (found.pick_config, found.instance_count, found.max_batch_size, found.concurrency) == (
        "model_config_2",
        1,
        2,
        4,
    )
    assert (found.throughput_per_s, found.p95_ms, found.dynamic_batching) == (1205.8, 5.9, True)
    assert (found.configs, found.measurements, found.wall_s) == (3, 4, 354.0)


def test_the_default_config_without_dynamic_batching_is_read_as_off(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(
        "\n".join(line for line in TABLE.splitlines() if "model_config_2" not in line and "model_config_3" not in line)
        + "\n"
    )
    found = _pick(1.0, tmp_path / "t.csv", configs(tmp_path))
    assert (found.pick_config, found.dynamic_batching, found.throughput_per_s) == ("model_config_default", False, 592.0)


def test_no_measurement_within_the_constraint_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "t.csv").write_text(TABLE.replace(",Yes,", ",No,"))
    with pytest.raises(RuntimeError, match="no measurement within the latency constraint"):
        _pick(1.0, tmp_path / "t.csv", configs(tmp_path))
