"""Triton Model Analyzer's quick search on a model repository, for side-by-side benchmarks (a peer tool, not ours).

Model Analyzer 1.58 is installed by benchmarks/peers_setup.sh under $PEERS (default /tmp/peers), with its own
tritonserver and perf_analyzer; `$PEERS/env.sh` names their paths. `quick_search` writes a profile config for local
launch mode (quick = its hill-climbing over instance count and max batch size, dynamic batching always on, and client
concurrency), runs `model-analyzer profile` with the peers' paths, and reads its inference CSV: the pick is the
measurement with the highest throughput among those it says satisfy the latency constraint, as its summary reports.
The pick's own dynamic-batching settings (queue delay, preferred sizes) are read from the config.pbtxt it generated,
so that the pick can be measured as Model Analyzer served it; its version is asked of the tool (`--version`).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import children
from perf_analyzer_tool import input_data_file

PEERS = Path(os.environ.get("PEERS", "/tmp/peers"))
FIELDS = [
    "model_name",
    "batch_size",
    "concurrency",
    "model_config_path",
    "instance_group",
    "max_batch_size",
    "satisfies_constraints",
    "perf_throughput",
    "perf_latency_p95",
]


@dataclass(frozen=True)
class QuickSearch:
    """What Model Analyzer measured and picked."""

    wall_s: float
    configs: int  # model configurations it measured
    measurements: int  # (configuration, concurrency) points it measured
    pick_config: str  # e.g. "model_config_3"
    instance_count: int
    max_batch_size: int
    dynamic_batching: bool  # quick search turns it on; its default configuration (the repository's own) may be off
    queue_delay_us: int  # its max_queue_delay_microseconds (absent: Triton's default, 0); 0 when batching is off
    preferred_batch_sizes: tuple[int, ...]  # its preferred_batch_size values (none: Triton forms the largest batch)
    concurrency: int
    throughput_per_s: float  # its measured inferences per second at the pick (batch 1 requests: = requests per s)
    p95_ms: float


def executable() -> Path:
    return PEERS / "ma" / "bin" / "model-analyzer"


def version() -> str:
    """The version the installed tool reports (`model-analyzer --version`), or why it could not say."""
    try:
        done = subprocess.run([str(executable()), "--version"], capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as failure:
        return f"(version unknown: {failure})"
    lines = (done.stdout or done.stderr).strip().splitlines()
    return (
        lines[-1].strip()
        if done.returncode == 0 and lines
        else f"(version unknown: --version exited {done.returncode})"
    )


def peer_paths() -> dict[str, str]:
    """The `export NAME=VALUE` lines of $PEERS/env.sh, as a dict."""
    lines = (PEERS / "env.sh").read_text().splitlines()
    return dict(line[len("export ") :].split("=", 1) for line in lines if line.startswith("export "))


def quick_search(
    repository: Path,
    model: str,
    bodies: list[dict],
    threshold_ms: float,
    max_instances: int,
    max_batch_size: int,
    max_concurrency: int,
    work: Path,
) -> QuickSearch:
    """Run `model-analyzer profile` in quick mode on `repository/model`; raises RuntimeError with its log's tail on
    failure."""
    shutil.rmtree(work, ignore_errors=True)
    (work / "results").mkdir(parents=True)
    data = input_data_file(bodies, work / "input-data.json")
    paths = peer_paths()
    config = {
        "model_repository": str(repository),
        "output_model_repository_path": str(work / "models"),
        "override_output_model_repository": True,
        "export_path": str(work / "results"),
        "checkpoint_directory": str(work / "results" / "checkpoints"),
        "triton_launch_mode": "local",
        "triton_server_path": paths["TRITONSERVER"],
        "triton_server_flags": {"backend-directory": paths["TRITON_BACKENDS"]},
        "triton_server_environment": {"LD_LIBRARY_PATH": paths["LD_LIBRARY_PATH"]},
        "triton_http_endpoint": "localhost:18000",
        "triton_grpc_endpoint": "localhost:18001",
        "triton_metrics_url": "http://localhost:18002/metrics",
        "perf_analyzer_path": paths["PERF_ANALYZER"],
        "collect_cpu_metrics": True,
        "run_config_search_mode": "quick",
        "run_config_search_min_concurrency": 1,
        "run_config_search_max_concurrency": max_concurrency,
        "run_config_search_max_instance_count": max_instances,
        "run_config_search_min_model_batch_size": 1,
        "run_config_search_max_model_batch_size": max_batch_size,
        "objectives": ["perf_throughput"],
        "constraints": {"perf_latency_p95": {"max": threshold_ms}},
        "inference_output_fields": FIELDS,
        "profile_models": {model: {"perf_analyzer_flags": {"input-data": str(data)}}},
    }
    (work / "ma.yaml").write_text(json.dumps(config, indent=1))  # JSON is YAML
    started = time.monotonic()
    with (work / "model-analyzer.log").open("w") as log:
        done = children.run(  # interrupted: Model Analyzer stops its own tritonserver, or its group is killed
            [str(executable()), "profile", "-f", str(work / "ma.yaml")], stdout=log, stderr=subprocess.STDOUT, cwd=work
        )
    wall = time.monotonic() - started
    if done.returncode != 0:
        tail = (work / "model-analyzer.log").read_text()[-3000:]
        raise RuntimeError(f"model-analyzer profile exited {done.returncode}:\n{tail}")
    return _pick(wall, work / "results" / "results" / "metrics-model-inference.csv", work / "models")


def _pick(wall: float, table: Path, configs: Path) -> QuickSearch:
    with table.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    if not rows:
        raise RuntimeError(f"{table}: no measurements")
    column = {
        name: next(c for c in rows[0] if c.lower().startswith(prefix))
        for name, prefix in (
            ("config", "model config path"),
            ("instances", "instance group"),
            ("mbs", "max batch"),
            ("concurrency", "concurrency"),
            ("ok", "satisfies"),
            ("throughput", "throughput"),
            ("p95", "p95"),
        )
    }
    within = [r for r in rows if r[column["ok"]].strip().lower() == "yes"]
    if not within:
        raise RuntimeError(f"{table}: no measurement within the latency constraint")
    best = max(within, key=lambda r: float(r[column["throughput"]]))
    config = (configs / best[column["config"]] / "config.pbtxt").read_text()
    batching = "dynamic_batching" in config
    return QuickSearch(
        wall_s=wall,
        configs=len({r[column["config"]] for r in rows}),
        measurements=len(rows),
        pick_config=best[column["config"]],
        instance_count=int(best[column["instances"]].split(":")[0]),
        max_batch_size=int(best[column["mbs"]]),
        dynamic_batching=batching,
        queue_delay_us=int(_field(config, "max_queue_delay_microseconds", "0")) if batching else 0,
        preferred_batch_sizes=tuple(
            int(size)
            for value in re.findall(r"preferred_batch_size:\s*(\[[^\]]*\]|\d+)", config)
            for size in re.findall(r"\d+", value)
        ),
        concurrency=int(best[column["concurrency"]]),
        throughput_per_s=float(best[column["throughput"]]),
        p95_ms=float(best[column["p95"]]),
    )


def _field(config: str, name: str, default: str) -> str:
    """A scalar field of a config.pbtxt (protobuf text format), or `default` when it is not written."""
    found = re.search(rf"\b{name}:\s*(\S+)", config)
    return found.group(1) if found else default
