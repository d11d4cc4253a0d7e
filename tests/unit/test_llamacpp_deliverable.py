"""A llama.cpp winner's deliverable from the store (`recommender export EXP --out DIR`): the `llama-server` command
line reads back to the winner's settings (its GGUF type's file, slots, batch sizes, threads, continuous batching),
the Kubernetes manifests are valid against the API's schema (kubernetes-validate; nothing applied), the replicas are
sized for the target output tokens/s and scale on llama-server's own token counter, and the README prices tokens and
compares with the runner-up."""

from __future__ import annotations

import json
import math
import shlex
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from recommender.candidates import expand_candidates
from recommender.metrics.headline import Headline
from recommender.modelrepo.llama import CONTEXT
from recommender.report.llamacpp_deliverable import TOKENS_METRIC
from recommender.spec import ExperimentSpec
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.store.results import ResultStore
from tests.unit.test_generation_report import TOKENS, windows
from tests.unit.test_vllm_deliverable import KUBERNETES, invoke

TARGET_TPS = 2000.0
SPEC = {
    "name": "llm",
    "model": {"source": "llama", "architecture": {"layers": 2, "hidden": 64, "heads": 4}},
    "target": {
        "kind": "llamacpp",
        "price_per_hour": 3.6,
        "llamacpp": {"gguf_types": ["f32", "q8_0"], "parallel": [4], "batch": [1024], "threads": [1]},
    },
    "latency_threshold": {"percentile": "p95", "ms": 5000},
    "slo": {"ttft_ms": {"p95": 100}, "itl_ms": {"p95": 20}},
    "capacity": {"target_output_tokens_per_second": TARGET_TPS, "autoscaling_headroom": 0.5},
}
WINNER, RUNNER_UP = "llamacpp-q8_0-np4-b1024-ub512-t1", "llamacpp-f32-np4-b1024-ub512-t1"
# per candidate, per level: (requests a 1-s window, TTFT ms, ITL ms): q8_0 keeps the SLOs at 40 requests/s, f32 at 20
LEVELS = {
    WINNER: [(20, 30.0, 8.0), (40, 60.0, 15.0)],
    RUNNER_UP: [(20, 40.0, 10.0), (40, 150.0, 30.0)],
    "llamacpp-default": [(10, 50.0, 12.0), (20, 200.0, 40.0)],  # the engine's default: under 20 a window, no p95
}


@pytest.fixture
def exported(tmp_path: Path) -> tuple[dict, Path]:
    url = f"sqlite:///{tmp_path / 'results.db'}"
    store, spec = ResultStore.open(url), ExperimentSpec.model_validate(SPEC)
    experiment_id = store.save_experiment(spec, status="done")
    for candidate in expand_candidates(spec):
        run = store.start_run(store.save_candidate(experiment_id, candidate), "current", None)
        store.finish_run(run, "ok", headline=Headline(repeats=1), windows=windows(LEVELS[candidate.name]))
    invoke("export", "llm", "--db", url, "--out", str(tmp_path / "out"))
    return json.loads(invoke("rank", "llm", "--db", url, "--json")), tmp_path / "out"


def test_the_serve_command_line_reads_back_to_the_winners_settings(exported) -> None:
    ranking, out = exported
    assert [r["name"] for r in ranking["ranked"]] == [WINNER, RUNNER_UP]
    assert [r["name"] for r in ranking["excluded"]] == ["llamacpp-default"]  # measured; too few samples for p95
    script = (out / "serve.sh").read_text().splitlines()
    assert script[1] == f"# {WINNER} as measured (cpu)"
    words = shlex.split(script[-1])
    assert words[0] == "llama-server" and "--metrics" in words and "--jinja" in words
    values = {word: words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("--")}
    back = LlamaCppSettings(
        gguf_type=values["--model"].removeprefix("/models/model.").removesuffix(".gguf"),
        parallel=int(values["--parallel"]),
        batch=int(values["--batch-size"]),
        ubatch=int(values["--ubatch-size"]),
        threads=int(values["--threads"]),
        continuous_batching="--cont-batching" in words,
        repack="--repack" in words,
    )
    assert back == LlamaCppSettings.from_engine(ranking["ranked"][0]["config"]["engine"])
    assert values["--threads-batch"] == values["--threads"] and values["--host"] == "0.0.0.0"
    assert int(values["--ctx-size"]) == CONTEXT * back.parallel  # the Llama's context per slot, as measured


def test_the_manifests_are_valid_kubernetes_sized_for_the_target_and_scale_on_its_token_counter(exported) -> None:
    ranking, out = exported
    documents = list(yaml.safe_load_all((out / "kubernetes.yaml").read_text()))
    assert [d["kind"] for d in documents] == ["Deployment", "Service", "HorizontalPodAutoscaler"]
    for document in documents:
        kubernetes_validate.validate(document, KUBERNETES, strict=True)  # raises on a schema violation
    deployment, service, autoscaler = documents
    output_tps = ranking["ranked"][0]["generation"]["output_tps"]["value"]
    assert output_tps == pytest.approx(40 * TOKENS)
    assert deployment["spec"]["replicas"] == math.ceil(TARGET_TPS / output_tps)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["command"] == ["llama-server"] and "/models/model.q8_0.gguf" in container["args"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/health"
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    metric = autoscaler["spec"]["metrics"][0]["pods"]
    assert metric["metric"]["name"] == TOKENS_METRIC
    assert metric["target"]["averageValue"] == f"{round(output_tps * 0.5 * 1000)}m"


def test_the_readme_prices_tokens_and_compares_with_the_runner_up(exported) -> None:
    ranking, out = exported
    readme = (out / "README.md").read_text()
    output_tps = ranking["ranked"][0]["generation"]["output_tps"]["value"]
    assert readme.startswith(f"# {WINNER} from experiment llm (llama.cpp)")
    assert f"per million output tokens: {3.6 / (output_tps * 3600) * 1e6:,.4f} USD" in readme
    assert f"- the runner-up, {RUNNER_UP}: {ranking['ranked'][1]['comparison']}" in readme
    assert "`model.q8_0.gguf`" in readme and "`llamacpp:tokens_predicted_total`" in readme
