"""`recommender run` of a llamacpp target end to end, with real llama-servers: two candidates (the tiny Llama as f32
and as q8_0 GGUF, each with an f32 KV cache and flash attention off) and the engine's default beside them
(`llamacpp-default`: llama-server's own slots, batch sizes, threads, context, f16 KV cache and flash attention)
converted, started, gated against the transformers fp32 reference (the f32 one must match it exactly, the default is
judged at fp16, token ids read from the server, teacher forced one position at a time), loaded, stored and ranked;
the report shows their output tokens/s, and the winner's deliverable is its llama-server command line and
schema-valid manifests."""

from __future__ import annotations

import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from recommender.candidates import RunStatus
from recommender.correctness.tokens import TOKEN_TOLERANCES
from recommender.hardware import available_cores, cpu_features
from recommender.store.results import ResultStore
from tests.llamacpp.conftest import TINY
from tests.processes import run_recommender

pytestmark = pytest.mark.llamacpp
RUN_SECONDS = 300  # two conversions (about 15 s each here), three server starts (seconds), gates, short loads
F32, Q8 = "llamacpp-f32-np2-b512-ub256-t1-kvf32-nofa", "llamacpp-q8_0-np2-b512-ub256-t1-kvf32-nofa"
DEFAULT = "llamacpp-default"
EXPERIMENT = f"""name: llamacpp-run
model:
  source: llama
  architecture: {{layers: {TINY.layers}, hidden: {TINY.hidden}, heads: {TINY.heads}, kv_heads: {TINY.kv_heads}}}
payload:
  generation: {{input_tokens: {{mean: 16}}, output_tokens: {{mean: 8}}, count: 8}}
target:
  kind: llamacpp
  ready_timeout_seconds: 240
  llamacpp:
    {{gguf_types: [f32, q8_0], parallel: [2], batch: [512], ubatch: [256], threads: [1], kv_cache: [f32],
      flash_attn: [false]}}
traffic:
  warmup_seconds: 1
  window_seconds: 2
  repeats: 1
  until_known: false
  phases:
    - {{initial_users: 2, spawn_rate: 0, duration_seconds: 6}}
latency_threshold: {{percentile: p95, ms: 60000}}
"""


def recommender(tmp_path: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return run_recommender(tmp_path, *args, timeout=timeout)  # the fixture's RECOMMENDER_LLAMACPP_VENV passed on


def test_a_llamacpp_experiment_runs_end_to_end(llamacpp_venv_in_use: Path, tmp_path: Path) -> None:
    (tmp_path / "llm.yaml").write_text(EXPERIMENT)
    done = recommender(tmp_path, "run", "llm.yaml", timeout=RUN_SECONDS + 60)
    assert done.returncode == 0, (done.stdout[-3000:], done.stderr[-3000:])
    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = {result.name: result for result in store.results("llamacpp-run")}
    assert sorted(results) == [DEFAULT, F32, Q8]
    engine = results[DEFAULT]  # llama-server's own settings: served, and gated at fp16 (its f16 cache and attention)
    assert engine.status == RunStatus.OK and engine.correctness is not None and engine.correctness["passed"], engine
    assert engine.correctness["precision"] == "fp16", engine.correctness

    exact = results[F32]  # f32 GGUF against transformers fp32 on the same weights: every greedy token the same
    assert exact.status == RunStatus.OK, exact.reason
    assert exact.correctness is not None and exact.correctness["checked"] and exact.correctness["passed"]
    assert exact.correctness["precision"] == "fp32"
    assert all(f["token_ids"] == "served" and f["first_divergence"] is None for f in exact.correctness["figures"])
    # teacher forced one position at a time (llama-server returns no prompt logprobs): fp32's logprob tolerance holds
    assert all(f["teacher_forced"] for f in exact.correctness["figures"]), exact.correctness["figures"]
    atol = TOKEN_TOLERANCES["fp32"].logprob_atol
    assert max(f["max_logprob_error"] for f in exact.correctness["figures"]) <= atol
    assert exact.headline is not None and exact.headline.requests > 0 and exact.headline.failures == 0
    # served on this host: its cores recorded (the threads cliff judges -t against them), the accelerator declared
    assert exact.hardware is not None and exact.hardware["cpu_cores"] == available_cores(), exact.hardware
    assert exact.hardware["declared"] == "local-cpu" and exact.hardware["accelerator"] == "cpu", exact.hardware
    assert tuple(exact.hardware["cpu_features"]) == cpu_features(), exact.hardware  # decide/cpu_precision reads them

    quantised = results[Q8]  # q8_0: judged by token agreement at q8's stated tolerance, its ids the server's
    gate = quantised.correctness
    assert gate is not None and gate["checked"] and gate["precision"] == "q8", gate
    assert gate["tolerance"]["min_agreement"] == TOKEN_TOLERANCES["q8"].min_agreement
    assert all(f["token_ids"] == "served" and f["teacher_forced"] for f in gate["figures"]), gate["figures"]
    assert quantised.status == (RunStatus.OK if gate["passed"] else RunStatus.INCORRECT), quantised.reason

    shown = recommender(tmp_path, "report", "llamacpp-run", timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    ranked = shown.stdout[shown.stdout.index("## Ranked configurations") :]
    assert "output tokens per second per instance" in ranked and F32 in ranked, shown.stdout
    logs = list(tmp_path.rglob("server.log"))
    assert len(logs) == 3  # one server per candidate
    slots = sorted(line.split("n_slots = ")[1].split(",")[0] for log in logs for line in log.read_text().splitlines()
                   if "n_slots = " in line)  # fmt: skip
    assert slots == ["2", "2", "4"], slots  # -np 2 twice; the default's are llama-server's own (4 on this build)

    delivered = recommender(tmp_path, "export", "llamacpp-run", "--out", "deliver", timeout=120)
    assert delivered.returncode == 0, delivered.stdout + delivered.stderr
    winner = next(
        name for name in (F32, Q8) if f"# {name} as measured (cpu)" in (tmp_path / "deliver/serve.sh").read_text()
    )
    assert results[winner].status == RunStatus.OK  # an incorrect candidate is never the one delivered
    for document in yaml.safe_load_all((tmp_path / "deliver" / "kubernetes.yaml").read_text()):
        kubernetes_validate.validate(document, "1.30", strict=True)
