"""A vLLM winner's deliverable from the store (`recommender export EXP --out DIR`): the `vllm serve` command line
round-trips the winner's engine arguments, the Kubernetes manifests are valid against the API's schema (checked with
kubernetes-validate; nothing applied), the replicas are sized for the target output tokens/s, and the README gives
cost per million input and output tokens and the comparison with the runner-up and the engine's default."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from typer.testing import CliRunner

from recommender.candidates import engine_settings, expand_candidates
from recommender.cli import build_app
from recommender.decide.autoscaling import plan_scaling
from recommender.metrics.headline import Headline
from recommender.report.vllm_deliverable import TokenPlan, manifests, serve_command
from recommender.spec import ExperimentSpec, load_spec
from recommender.store.results import ResultStore
from tests.unit.test_generation_report import TOKENS, windows

KUBERNETES = "1.30"  # the API version the manifests are checked against
TARGET_TPS = 2000.0
SPEC = {
    "name": "llm",
    "model": {"source": "llama", "architecture": {"layers": 2, "hidden": 64, "heads": 4}},
    "target": {
        "kind": "vllm",
        "price_per_hour": 3.6,
        "kv_cache_gib": 2,
        "engine_args": {"max_num_seqs": [1, 8], "enable_prefix_caching": [False], "max_model_len": 1024},
    },
    "latency_threshold": {"percentile": "p95", "ms": 5000},
    "slo": {"ttft_ms": {"p95": 100}, "itl_ms": {"p95": 20}},
    "capacity": {"target_output_tokens_per_second": TARGET_TPS, "autoscaling_headroom": 0.5},
}
# per candidate, per level: (requests a 1-s window, TTFT ms, ITL ms); seqs8 keeps the SLOs at 40 requests/s, the
# default at 30, seqs1 at 20
LEVELS = {
    "vllm-seqs8-nopc": [(20, 30.0, 8.0), (40, 60.0, 15.0)],
    "vllm-default": [(30, 40.0, 10.0), (60, 90.0, 30.0)],
    "vllm-seqs1-nopc": [(20, 40.0, 10.0), (40, 150.0, 30.0)],
}


@pytest.fixture
def url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store, spec = ResultStore.open(url), ExperimentSpec.model_validate(SPEC)
    experiment_id = store.save_experiment(spec, status="done")
    for candidate in expand_candidates(spec):
        run = store.start_run(store.save_candidate(experiment_id, candidate), "current", None)
        store.finish_run(run, "ok", headline=Headline(repeats=1), windows=windows(LEVELS[candidate.name]))
    return url


def invoke(*args: str) -> str:
    result = CliRunner().invoke(build_app(), list(args))
    assert result.exit_code == 0, result.output
    return result.output


def exported(url: str, out: Path) -> dict:
    invoke("export", "llm", "--db", url, "--out", str(out))
    return json.loads(invoke("rank", "llm", "--db", url, "--json"))


def test_the_serve_command_line_round_trips_the_winners_engine_arguments(url, tmp_path) -> None:
    ranked = exported(url, tmp_path / "out")["ranked"]
    assert ranked[0]["name"] == "vllm-seqs8-nopc"
    script = (tmp_path / "out" / "serve.sh").read_text().splitlines()
    words = shlex.split(script[-1])
    assert words[0] == "VLLM_CPU_KVCACHE_SPACE=2" and words[1:3] == ["vllm", "serve"]
    flags = words[3:]
    back: dict = {}
    for i, word in enumerate(flags):  # --name value, --flag (true), --no-flag (false): back to engine arguments
        if not word.startswith("--"):
            continue
        follows = i + 1 < len(flags) and not flags[i + 1].startswith("--")
        name = word[2:].removeprefix("no-").replace("-", "_")
        back[name] = flags[i + 1] if follows else not word.startswith("--no-")
    settings = engine_settings(ranked[0]["config"])
    settings.pop("kv_cache_gib")
    assert {name: back[name] for name in settings} == {
        name: str(v) if not isinstance(v, bool) else v for name, v in settings.items()
    }
    assert back["enforce_eager"] is True and back["served_model_name"] == "model" and back["port"] == "8000"


def test_the_manifests_are_valid_kubernetes_and_sized_for_the_target_output_tokens(url, tmp_path) -> None:
    winner = exported(url, tmp_path / "out")["ranked"][0]
    documents = list(yaml.safe_load_all((tmp_path / "out" / "kubernetes.yaml").read_text()))
    assert [d["kind"] for d in documents] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)  # raises on a schema violation
    deployment, service, autoscaler = documents
    output_tps = winner["generation"]["output_tps"]["value"]
    assert output_tps == pytest.approx(40 * TOKENS)
    assert deployment["spec"]["replicas"] == math.ceil(TARGET_TPS / output_tps)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["env"] == [{"name": "VLLM_CPU_KVCACHE_SPACE", "value": "2"}]
    assert "--max-num-seqs" in container["args"] and container["command"] == ["vllm"]
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    target = autoscaler["spec"]["metrics"][0]["pods"]["target"]["averageValue"]
    assert target == f"{round(output_tps * 0.5 * 1000)}m"  # half of what a replica streams, in milli-tokens/s
    assert autoscaler["spec"]["maxReplicas"] == math.ceil(TARGET_TPS / (output_tps * 0.5))


def test_a_manifest_the_schema_refuses_is_caught() -> None:
    """The check can fail: a Deployment without its selector is not valid Kubernetes."""
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(
            {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}, "spec": {"replicas": "two"}},
            KUBERNETES,
            strict=True,
        )


def test_the_readme_prices_tokens_and_compares_with_the_runner_up_and_the_default(url, tmp_path) -> None:
    ranked = exported(url, tmp_path / "out")["ranked"]
    readme = (tmp_path / "out" / "README.md").read_text()
    output_tps = ranked[0]["generation"]["output_tps"]["value"]
    input_tps = ranked[0]["generation"]["input_tps"]["value"]
    assert f"per million output tokens: {3.6 / (output_tps * 3600) * 1e6:,.4f} USD" in readme
    assert f"per million input tokens: {3.6 / (input_tps * 3600) * 1e6:,.4f} USD" in readme
    assert [r["name"] for r in ranked] == ["vllm-seqs8-nopc", "vllm-default", "vllm-seqs1-nopc"]
    assert f"- the runner-up, vllm-default (the engine's default): {ranked[1]['comparison']}" in readme
    assert ranked[1]["comparison"].startswith("winner has ") and "higher throughput" in ranked[1]["comparison"]
    assert f"replicas: {math.ceil(TARGET_TPS / output_tps)} for 2,000 output tokens/s" in readme
    assert f"fleet cost: {3.6 * math.ceil(TARGET_TPS / output_tps):,.4f} USD per hour" in readme


def test_a_lower_ranked_export_compares_with_the_recommendation_and_the_default(url, tmp_path) -> None:
    invoke("export", "llm", "--db", url, "--out", str(tmp_path / "third"), "--rank", "3")
    ranked = json.loads(invoke("rank", "llm", "--db", url, "--json"))["ranked"]
    readme = (tmp_path / "third" / "README.md").read_text()
    assert f"- the recommendation, vllm-seqs8-nopc: {ranked[2]['comparison']}" in readme
    assert f"- the engine's default, vllm-default (against the recommendation): {ranked[1]['comparison']}" in readme


def test_on_a_gpu_the_server_is_not_eager_and_asks_for_its_tensor_parallel_gpus(tmp_path) -> None:
    path = tmp_path / "gpu.yaml"
    llama = "model: {source: llama, architecture: {layers: 2, hidden: 64, heads: 4}}\n"
    path.write_text(
        "name: gpu\n" + llama + "target: {kind: vllm, engine_args: {tensor_parallel_size: [2], dtype: float16}}\n"
    )
    candidate = next(c for c in expand_candidates(load_spec(path)) if c.name == "vllm-tp2")
    words = shlex.split(serve_command(candidate, "gpu"))
    assert words[:2] == ["vllm", "serve"] and "--enforce-eager" not in words  # no CPU KV variable either
    assert words[words.index("--tensor-parallel-size") + 1] == "2" and words[words.index("--dtype") + 1] == "float16"
    plan = TokenPlan(100.0, 90.0, "point estimate", 50.0, None, 3, plan_scaling("gpu", 100.0, 270.0), None, None, None)
    deployment, *_ = manifests(candidate, "gpu", "gpu-vllm-tp2", plan, "registry.example/vllm:0.32.0")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"] == {"limits": {"nvidia.com/gpu": 2}} and "env" not in container
    assert container["image"] == "registry.example/vllm:0.32.0" and deployment["spec"]["replicas"] == 3
    kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
