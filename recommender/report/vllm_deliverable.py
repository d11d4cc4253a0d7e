"""The deliverable of a vLLM candidate (a generative winner): how to serve it as it was measured, how many replicas
for a target output tokens/s, how they scale, what a million tokens cost, and how it compares.

    DIR/serve.sh            the `vllm serve` command line with the candidate's engine arguments (and KV cache)
    DIR/kubernetes.yaml     Deployment + Service + HorizontalPodAutoscaler (rendered here, nothing is applied)
    DIR/README.md           the figures, the comparison with the runner-up and the engine's default, the placeholders

Sizing: replicas = ceil(capacity.target_output_tokens_per_second / output tokens/s per instance), that rate taken
at the lower bound of its interval when there is one above 0 (decide/cost.py initial_instance_count, the same rule
as MaxInvocations); without that target, the recommendation's fleet for target_invocations_per_minute (goodput).
Autoscaling (decide/autoscaling.py plan_scaling, in output tokens/s): each replica is asked to carry headroom x its
output tokens/s, min 1 replica, max for the peak. Cost per million input (output) tokens: one instance-hour's price
over the input (output) tokens it streams in an hour at the level (decide/cost.py cost_per_million_tokens_at).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from recommender.candidates import Candidate, engine_settings
from recommender.decide.autoscaling import ScalingPlan, plan_scaling
from recommender.decide.cost import cost_per_million_tokens_at, initial_instance_count
from recommender.decide.ranking import RankedCandidate
from recommender.decide.recommendation import Recommendation, endpoint_name_for
from recommender.errors import ExportError
from recommender.spec import ExperimentSpec
from recommender.targets.vllm import engine_flags, flag_of, served_flags

PORT = 8000
MODEL_PATH = "/models/model"  # where the model folder is mounted in the container
IMAGE_PLACEHOLDER = "<VLLM_SERVING_IMAGE>"
CLAIM_PLACEHOLDER = "<MODEL_VOLUME_CLAIM>"
# the Pods metric the HorizontalPodAutoscaler reads: the rate of vLLM's vllm:generation_tokens_total counter per pod,
# as a metrics adapter (e.g. Prometheus Adapter) must expose it
TOKENS_METRIC = "vllm_generation_tokens_per_second"
DEFAULT_PREFIX = "vllm-default"  # candidates.vllm_candidates' default candidate's name


@dataclass(frozen=True)
class TokenPlan:
    """A generative candidate sized and priced in tokens."""

    output_tps: float  # output tokens/s per instance at its level (the point)
    sizing_tps: float  # what the replicas are sized on: the interval's lower bound when above 0, else the point
    sized_on: str
    input_tps: float | None
    target_output_tps: float | None  # capacity.target_output_tokens_per_second; None: sized on requests per minute
    replicas: int
    scaling: ScalingPlan  # in output tokens/s per replica
    cost_per_million_input: float | None
    cost_per_million_output: float | None
    price_per_hour: float | None


def token_plan(rec: Recommendation, picked: RankedCandidate, spec: ExperimentSpec, name: str) -> TokenPlan:
    """Replicas, autoscaling and cost per million tokens of `picked` (ExportError without output tokens/s)."""
    c = picked.candidate
    output = c.generated("output_tps")
    if not output or output <= 0:
        raise ExportError(
            f"{c.name} has no output tokens per second to size a deployment on",
            hint="measure it again: a generative run stores its tokens per window",
        )
    interval = c.generation.interval("output_tps") if c.generation is not None else None
    on_interval = interval is not None and interval.low > 0
    sizing = interval.low if interval is not None and on_interval else output
    sized_on = f"interval lower bound ({c.interval_label})" if on_interval else "point estimate"
    target = spec.capacity.target_output_tokens_per_second
    replicas = initial_instance_count(target, sizing) if target else rec.fleets[c.key].fleet_size
    peak = target if target else replicas * sizing
    scaling = plan_scaling(name, output, peak, headroom=spec.capacity.autoscaling_headroom)
    price = c.cost_per_hour
    given = c.generated("input_tps")
    return TokenPlan(
        output,
        sizing,
        sized_on,
        given,
        target,
        replicas,
        scaling,
        cost_per_million_tokens_at(price, given),
        cost_per_million_tokens_at(price, output),
        price,
    )


def serve_command(candidate: Candidate, accelerator: str, model: str = MODEL_PATH, served_name: str = "model") -> str:
    """The `vllm serve` command line that serves `candidate` as it was measured: its engine arguments as flags (eager
    on the CPU unless they say), on all interfaces at PORT, its KV cache as the CPU's environment variable."""
    settings = engine_settings(candidate.config())
    kv = settings.pop("kv_cache_gib", None)
    known = frozenset(flag_of(name, value) for name, value in settings.items())
    flags = served_flags(engine_flags(settings, known), eager=accelerator != "gpu")
    line = ["vllm", "serve", model, "--served-model-name", served_name, "--host", "0.0.0.0", "--port", str(PORT)]
    environment = [f"VLLM_CPU_KVCACHE_SPACE={kv:g}"] if kv is not None and accelerator != "gpu" else []
    return shlex.join([*environment, *line, *flags])


def manifests(candidate: Candidate, accelerator: str, name: str, plan: TokenPlan, image: str | None) -> list[dict]:
    """The Kubernetes Deployment, Service and HorizontalPodAutoscaler serving `candidate` (`name`: a DNS-1123
    label), as plain data."""
    words = shlex.split(serve_command(candidate, accelerator))
    environment = [word for word in words if "=" in word and not word.startswith("-")]
    command = words[len(environment) :]
    container: dict[str, Any] = {
        "name": "vllm",
        "image": image or IMAGE_PLACEHOLDER,
        "command": command[:1],
        "args": command[1:],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/v1/models", "port": "http"}, "periodSeconds": 5},
        "volumeMounts": [{"name": "model", "mountPath": MODEL_PATH, "readOnly": True}],
    }
    if environment:
        container["env"] = [{"name": k, "value": v} for k, v in (word.split("=", 1) for word in environment)]
    if accelerator == "gpu":
        gpus = int(engine_settings(candidate.config()).get("tensor_parallel_size", 1))
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return serving_manifests(name, container, plan, PORT, TOKENS_METRIC)


def serving_manifests(name: str, container: dict[str, Any], plan: TokenPlan, port: int, metric: str) -> list[dict]:
    """A generative engine's Deployment (its `container`, the model from a volume claim), Service (`port`) and
    HorizontalPodAutoscaler on the per-pod tokens/s `metric`, for vLLM's and llama.cpp's deliverables alike."""
    labels = {"app.kubernetes.io/name": name}
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": plan.replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "containers": [container],
                    "volumes": [{"name": "model", "persistentVolumeClaim": {"claimName": CLAIM_PLACEHOLDER}}],
                },
            },
        },
    }
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": labels, "ports": [{"name": "http", "port": port, "targetPort": "http"}]},
    }
    autoscaler = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
            "minReplicas": plan.scaling.min_capacity,
            "maxReplicas": plan.scaling.max_capacity,
            "metrics": [
                {
                    "type": "Pods",
                    "pods": {
                        "metric": {"name": metric},
                        "target": {
                            "type": "AverageValue",
                            "averageValue": f"{round(plan.scaling.target_value * 1000)}m",
                        },
                    },
                }
            ],
        },
    }
    return [deployment, service, autoscaler]


def kubernetes_name(experiment: str, candidate: str) -> str:
    """A DNS-1123 label (lowercase letters, digits, hyphens; at most 63) from the experiment and candidate names."""
    return re.sub(r"[^a-z0-9-]+", "-", endpoint_name_for(experiment, candidate).lower()).strip("-")[:63] or "vllm"


def write_vllm_deliverable(
    rec: Recommendation, spec: ExperimentSpec, picked: RankedCandidate, out: Path, image: str | None, accelerator: str
) -> tuple[TokenPlan, tuple[Path, ...]]:
    """Write serve.sh, kubernetes.yaml and README.md for the vLLM candidate `picked` into `out` (claimed)."""
    candidate = Candidate.from_config(picked.candidate.config)
    name = kubernetes_name(rec.experiment, candidate.name)
    plan = token_plan(rec, picked, spec, name)
    serve = out / "serve.sh"
    serve.write_text(
        f"#!/bin/sh\n# {candidate.name} as measured ({accelerator})\n{serve_command(candidate, accelerator)}\n"
    )
    documents = manifests(candidate, accelerator, name, plan, image)
    manifest = out / "kubernetes.yaml"
    manifest.write_text(manifest_yaml(documents))
    readme = out / "README.md"
    readme.write_text(vllm_readme(rec, picked, candidate, plan, accelerator, image))
    return plan, (serve, manifest, readme)


def comparisons(rec: Recommendation, picked: RankedCandidate) -> list[str]:
    """The pick against the runner-up and against the engine's default, in the ranking's words."""
    ranked = rec.ranking.ranked
    default = next((r for r in ranked if r.candidate.name.startswith(DEFAULT_PREFIX)), None)
    other = ranked[0] if picked.rank != 1 else ranked[1] if len(ranked) > 1 else None
    if other is None:
        lines = ["- no runner-up: it is the only candidate within the limits"]
    else:
        role = "the recommendation" if picked.rank != 1 else "the runner-up"
        also = " (the engine's default)" if default is not None and other.candidate.key == default.candidate.key else ""
        words = picked.comparison if picked.rank != 1 else other.comparison
        lines = [f"- {role}, {other.candidate.name}{also}: {words}"]
    shown = {picked.candidate.key} | ({other.candidate.key} if other is not None else set())
    if default is not None and default.candidate.key not in shown:
        against = "" if picked.rank == 1 else " (against the recommendation)"
        lines.append(f"- the engine's default, {default.candidate.name}{against}: {default.comparison}")
    excluded = next((e for e in rec.ranking.excluded if e.candidate.name.startswith(DEFAULT_PREFIX)), None)
    if excluded is not None:
        lines.append(f"- the engine's default, {excluded.candidate.name}: not ranked ({'; '.join(excluded.reasons)})")
    return lines


def vllm_readme(
    rec: Recommendation,
    picked: RankedCandidate,
    candidate: Candidate,
    plan: TokenPlan,
    accelerator: str,
    image: str | None,
) -> str:
    placeholders = [f"`{CLAIM_PLACEHOLDER}`"] + ([] if image else [f"`{IMAGE_PLACEHOLDER}`"])
    lines = [
        f"# {candidate.name} from experiment {rec.experiment} (vLLM)",
        "",
        *figure_lines(rec, picked, plan),
        "## Contents",
        "",
        f"- `serve.sh`: the `vllm serve` command line as measured on the {accelerator.upper()} (its engine "
        "arguments; the model folder at " + f"`{MODEL_PATH}`).",
        "- `kubernetes.yaml`: a Deployment (replicas above, readiness on `GET /v1/models`), a Service on port "
        f"{PORT} and a HorizontalPodAutoscaler on the Pods metric `{TOKENS_METRIC}` (the per-pod rate of vLLM's "
        "`vllm:generation_tokens_total`, which a metrics adapter such as Prometheus Adapter must expose).",
        "",
        "## Before you deploy",
        "",
        "Replace " + ", ".join(placeholders) + " in kubernetes.yaml, and put the model folder the benchmark served "
        "(model.source llama: the folder `recommender run` built under ~/.cache/recommender/models) on that volume.",
        "",
        "```sh",
        "kubectl apply -f kubernetes.yaml",
        "```",
        "",
    ]
    return "\n".join(lines)


def figure_lines(rec: Recommendation, picked: RankedCandidate, plan: TokenPlan) -> list[str]:
    """A generative deliverable's README from its rank to its comparisons (whichever engine serves it)."""
    c, s = picked.candidate, plan.scaling
    target = (
        f"{plan.target_output_tps:,.0f} output tokens/s (capacity.target_output_tokens_per_second)"
        if plan.target_output_tps
        else f"{rec.target_ipm:,.0f} requests per minute within the SLOs (capacity.target_invocations_per_minute; "
        "set capacity.target_output_tokens_per_second to size on tokens)"
    )
    return [
        f"Rank {picked.rank} of {len(rec.ranking.ranked)} ranked candidates"
        + (
            " (the recommendation)."
            if picked.rank == 1
            else f" (the recommendation is {rec.ranking.ranked[0].candidate.name})."
        ),
        "",
        f"{c.name} sustains a goodput of {c.ipm:,.0f} requests per minute per instance within the SLOs at "
        f"{rec.percentile} {_figure(c.model_latency_ms, '{:,.1f}')} ms (threshold {rec.threshold_ms:g} ms) with "
        f"{c.error_rate:.2%} errors.",
        "",
        "## Figures",
        "",
        f"- output tokens/s per instance: {plan.output_tps:,.1f} (sized on the {plan.sized_on}: "
        f"{plan.sizing_tps:,.1f})",
        f"- input tokens/s per instance: {_figure(plan.input_tps, '{:,.1f}')}",
        f"- goodput: {c.ipm:,.0f} requests per minute per instance within the SLOs",
        f"- replicas: {plan.replicas} for {target}; fleet cost: {_usd(_times(plan.price_per_hour, plan.replicas))}"
        + ("" if plan.price_per_hour is None else " per hour"),
        f"- autoscaling: {s.min_capacity} to {s.max_capacity} replicas, target {s.target_value:,.1f} output "
        f"tokens/s per replica ({s.headroom:.0%} of its measured output tokens/s)",
        f"- cost per million input tokens: {_usd(plan.cost_per_million_input)}; per million output tokens: "
        f"{_usd(plan.cost_per_million_output)} (each: one instance-hour's price over the tokens of that kind it "
        "streams in an hour at the level measured)",
        "",
        "## Compared",
        "",
        *comparisons(rec, picked),
        "",
    ]


def manifest_yaml(documents: list[dict]) -> str:
    """Kubernetes documents as one YAML stream, each mapping written out where it appears."""
    return yaml.dump_all(documents, Dumper=_Plain, sort_keys=False)


class _Plain(yaml.SafeDumper):
    """Each mapping written out where it appears (no `&id001` anchors: the manifests are read by people too)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _times(price: float | None, count: int) -> float | None:
    return None if price is None else price * count


def _figure(value: float | None, form: str) -> str:
    return "not recorded" if value is None else form.format(value)


def _usd(value: float | None) -> str:
    return "unpriced (set target.price_per_hour or target.priced_as)" if value is None else f"{value:,.4f} USD"


__all__ = [
    "TokenPlan",
    "comparisons",
    "figure_lines",
    "kubernetes_name",
    "manifest_yaml",
    "manifests",
    "serve_command",
    "token_plan",
    "write_vllm_deliverable",
]
