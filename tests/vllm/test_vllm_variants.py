"""vLLM engine settings as variants against the real vLLM: the refusals (targets/vllm_rules.py) are vLLM's own
(each configuration handed to vLLM's own engine configuration code, in its virtualenv, with nothing started), and
a grid of listed settings runs through `recommender run` with real servers: the engine's default and max_num_seqs 1
measured, max_num_seqs 4096 skipped with vLLM's reason before any server starts; the winner's deliverable is
exported from those runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from recommender.candidates import RunStatus
from recommender.modelrepo.llama import CONTEXT
from recommender.store.results import ResultStore
from recommender.targets.vllm_rules import refusal
from tests.vllm.conftest import ROOT, TINY

pytestmark = pytest.mark.vllm
HERE = Path(__file__).resolve().parent
# (settings, None where vLLM starts it, else words of vLLM's own refusal that ours must say too)
CPU_CONFIGURATIONS: list[tuple[dict, str | None]] = [
    ({}, None),
    ({"dtype": "float16"}, None),
    ({"dtype": "bfloat16", "max_num_seqs": 4}, None),
    ({"max_num_batched_tokens": 512}, None),
    ({"max_num_batched_tokens": 512, "enable_chunked_prefill": False}, "max_num_batched_tokens (512) is smaller than"),
    ({"max_num_batched_tokens": 512, "enable_chunked_prefill": False, "max_model_len": 512}, None),
    ({"max_num_seqs": 256, "enable_chunked_prefill": False}, None),
    ({"max_num_seqs": 4096}, "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)"),
    ({"max_num_batched_tokens": 4, "max_num_seqs": 8}, "max_num_batched_tokens (4) must be greater than or equal"),
    ({"tensor_parallel_size": 3}, "must be divisible by tensor parallel size (3)"),
    ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
    ({"kv_cache_gib": 1.5}, "invalid literal for int() with base 10: '1.5'"),
    ({"kv_cache_gib": 2, "enable_prefix_caching": False}, None),
    ({"max_model_len": CONTEXT + 1}, f"User-specified max_model_len ({CONTEXT + 1}) is greater than the derived"),
]
RUN_SECONDS = 150  # the grid's bound: two server starts (about 35 s each here), two short loads, one skip


def test_the_cpu_refusals_are_exactly_vllms_own(vllm_venv_in_use: Path, model_folder: Path) -> None:
    python = vllm_venv_in_use / "bin" / "python"
    asked = json.dumps([settings for settings, _ in CPU_CONFIGURATIONS])
    done = subprocess.run(
        [str(python), str(HERE / "engine_config.py"), str(model_folder), asked],
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1"},
        check=False,
    )
    answers = [json.loads(line) for line in done.stdout.splitlines() if line.startswith(("null", '"'))]
    assert len(answers) == len(CPU_CONFIGURATIONS), done.stderr[-2000:]
    for (settings, words), vllms in zip(CPU_CONFIGURATIONS, answers, strict=True):
        ours = refusal(settings, None, CONTEXT, heads=TINY.heads)
        assert (ours is None, vllms is None) == (words is None, words is None), (settings, ours, vllms)
        if words is not None:
            assert words in str(ours) and words in str(vllms), (words, ours, vllms)


EXPERIMENT = f"""name: variants
model:
  source: llama
  architecture: {{layers: {TINY.layers}, hidden: {TINY.hidden}, heads: {TINY.heads}, kv_heads: {TINY.kv_heads}}}
payload:
  generation: {{input_tokens: {{mean: 16}}, output_tokens: {{mean: 8}}, count: 8}}
target:
  kind: vllm
  ready_timeout_seconds: 240
  engine_args: {{max_num_seqs: [1, 4096]}}
traffic:
  warmup_seconds: 1
  window_seconds: 2
  repeats: 1
  until_known: false
  phases:
    - {{initial_users: 2, spawn_rate: 0, duration_seconds: 6}}
latency_threshold: {{percentile: p95, ms: 60000}}
"""


def test_a_grid_of_engine_settings_runs_through_recommender_run(vllm_venv_in_use: Path, tmp_path: Path) -> None:
    (tmp_path / "variants.yaml").write_text(EXPERIMENT)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "run", "variants.yaml"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS + 60,
        check=False,
    )
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = {result.name: result for result in store.results("variants")}
    assert sorted(results) == ["vllm-default", "vllm-seqs1", "vllm-seqs4096"]
    for name in ("vllm-default", "vllm-seqs1"):
        assert results[name].status == RunStatus.OK, (name, results[name].reason)
        assert results[name].headline is not None and results[name].headline.requests > 0
    skipped = results["vllm-seqs4096"]
    assert skipped.status == RunStatus.SKIPPED
    assert "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)" in str(skipped.reason)
    logs = {path.parent.name.split("-")[1]: path.read_text() for path in tmp_path.rglob("server.log")}
    assert sorted(logs) == ["default", "seqs1"]  # no server for the refused one
    assert "--max-num-seqs" not in logs["default"] and "'max_num_seqs': 1" in logs["seqs1"]
    # the winner's deliverable from these real runs: its serve line and manifests (schema-valid; nothing applied)
    exported = subprocess.run(
        [sys.executable, "-m", "recommender", "export", "variants", "--out", "deliver"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert exported.returncode == 0, exported.stdout + exported.stderr
    serve = (tmp_path / "deliver" / "serve.sh").read_text()
    winner = next(name for name in ("vllm-default", "vllm-seqs1") if f"# {name} as measured" in serve)
    assert ("--max-num-seqs 1" in serve) == (winner == "vllm-seqs1")
    for document in yaml.safe_load_all((tmp_path / "deliver" / "kubernetes.yaml").read_text()):
        kubernetes_validate.validate(document, "1.30", strict=True)
