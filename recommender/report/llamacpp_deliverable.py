"""The deliverable of a llama.cpp candidate (a generative winner served by llama-server): how to serve it as it was
measured, how many replicas, how they scale, what a million tokens cost, and how it compares (sizing, autoscaling,
cost and comparisons as a vLLM winner's: vllm_deliverable.py).

    DIR/serve.sh            the `llama-server` command line with the candidate's settings (targets/llamacpp.command)
    DIR/kubernetes.yaml     Deployment + Service + HorizontalPodAutoscaler (rendered here, nothing is applied)
    DIR/README.md           the figures, the comparison with the runner-up, the placeholders

The server is started as the measured one was (the same flags: its GGUF type's file, parallel slots, batch and
micro-batch, threads, continuous batching, the Llama's context per slot, the file's chat template), on every
interface, with `--metrics`: the HorizontalPodAutoscaler reads the per-pod rate of its
`llamacpp:tokens_predicted_total` counter.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from recommender.candidates import Candidate
from recommender.decide.ranking import RankedCandidate
from recommender.decide.recommendation import Recommendation
from recommender.errors import ExportError
from recommender.modelrepo.llama import CONTEXT
from recommender.report.vllm_deliverable import (
    CLAIM_PLACEHOLDER,
    TokenPlan,
    figure_lines,
    kubernetes_name,
    manifest_yaml,
    serving_manifests,
    token_plan,
)
from recommender.spec import ExperimentSpec
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.targets.llamacpp import command

PORT = 8080  # llama-server's own default port
MODEL_DIR = "/models"  # where the volume with the GGUF file is mounted in the container
IMAGE_PLACEHOLDER = "<LLAMA_CPP_SERVER_IMAGE>"
# the Pods metric the HorizontalPodAutoscaler reads: the rate of llama-server's llamacpp:tokens_predicted_total
# counter per pod, as a metrics adapter (e.g. Prometheus Adapter) must expose it
TOKENS_METRIC = "llamacpp_tokens_predicted_per_second"


def model_file(settings: LlamaCppSettings) -> str:
    """Where the container reads the candidate's GGUF file (its type in the name: model.q8_0.gguf)."""
    return f"{MODEL_DIR}/model.{settings.gguf_type}.gguf"


def serve_command(candidate: Candidate, served_name: str = "model") -> str:
    """The `llama-server` command line that serves `candidate` as it was measured, on every interface at PORT, with
    its Prometheus metrics on (ExportError for a candidate that is not llama.cpp's)."""
    if not candidate.engine:
        raise ExportError(f"{candidate.name} has no llama.cpp settings to serve it with")
    settings = LlamaCppSettings.from_engine(candidate.engine)
    line = command(Path("llama-server"), Path(model_file(settings)), served_name, PORT, settings, CONTEXT, "0.0.0.0")
    return shlex.join([*line, "--metrics"])


def manifests(candidate: Candidate, name: str, plan: TokenPlan, image: str | None) -> list[dict]:
    """The Kubernetes Deployment, Service and HorizontalPodAutoscaler serving `candidate` (`name`: a DNS-1123
    label), as plain data."""
    words = shlex.split(serve_command(candidate))
    container: dict[str, Any] = {
        "name": "llama-server",
        "image": image or IMAGE_PLACEHOLDER,
        "command": words[:1],
        "args": words[1:],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/health", "port": "http"}, "periodSeconds": 5},
        "volumeMounts": [{"name": "model", "mountPath": MODEL_DIR, "readOnly": True}],
    }
    return serving_manifests(name, container, plan, PORT, TOKENS_METRIC)


def write_llamacpp_deliverable(
    rec: Recommendation, spec: ExperimentSpec, picked: RankedCandidate, out: Path, image: str | None
) -> tuple[TokenPlan, tuple[Path, ...]]:
    """Write serve.sh, kubernetes.yaml and README.md for the llama.cpp candidate `picked` into `out` (claimed)."""
    candidate = Candidate.from_config(picked.candidate.config)
    name = kubernetes_name(rec.experiment, candidate.name)
    plan = token_plan(rec, picked, spec, name)
    serve = out / "serve.sh"
    serve.write_text(f"#!/bin/sh\n# {candidate.name} as measured (cpu)\n{serve_command(candidate)}\n")
    manifest = out / "kubernetes.yaml"
    manifest.write_text(manifest_yaml(manifests(candidate, name, plan, image)))
    readme = out / "README.md"
    readme.write_text(llamacpp_readme(rec, picked, candidate, plan, image))
    return plan, (serve, manifest, readme)


def llamacpp_readme(
    rec: Recommendation, picked: RankedCandidate, candidate: Candidate, plan: TokenPlan, image: str | None
) -> str:
    settings = LlamaCppSettings.from_engine(candidate.engine or "{}")
    placeholders = [f"`{CLAIM_PLACEHOLDER}`"] + ([] if image else [f"`{IMAGE_PLACEHOLDER}`"])
    lines = [
        f"# {candidate.name} from experiment {rec.experiment} (llama.cpp)",
        "",
        *figure_lines(rec, picked, plan),
        "## Contents",
        "",
        "- `serve.sh`: the `llama-server` command line as measured on the CPU (its settings; the GGUF file at "
        f"`{model_file(settings)}`).",
        "- `kubernetes.yaml`: a Deployment (replicas above, readiness on `GET /health`), a Service on port "
        f"{PORT} and a HorizontalPodAutoscaler on the Pods metric `{TOKENS_METRIC}` (the per-pod rate of "
        "llama-server's `llamacpp:tokens_predicted_total`, from its `--metrics`, which a metrics adapter such as "
        "Prometheus Adapter must expose).",
        "",
        "## Before you deploy",
        "",
        "Replace " + ", ".join(placeholders) + " in kubernetes.yaml, and put the GGUF file the benchmark served "
        f"on that volume as `{model_file(settings).removeprefix(MODEL_DIR + '/')}` (model.source llama: `recommender "
        f"run` converted it beside the Llama folder under ~/.cache/recommender/models, named "
        f"`llama-<key>.{settings.gguf_type}-<content key>.gguf`).",
        "",
        "```sh",
        "kubectl apply -f kubernetes.yaml",
        "```",
        "",
    ]
    return "\n".join(lines)


__all__ = ["manifests", "serve_command", "write_llamacpp_deliverable"]
