"""The deliverable: a ranked candidate exported as a deployable Triton model repository plus the SageMaker and
Application Auto Scaling request bodies that deploy and scale it, and a README saying how to use them.

    DIR/model_repository/<model>/{config.pbtxt, 1/model.py, 1/<artifact copy>}   (measured in the Python backend)
    DIR/model_repository/<model>/{config.pbtxt, 1/model.<pt|onnx|plan>}           (measured by a native backend)
    DIR/sagemaker/{create_model.json, create_endpoint_config.json, create_endpoint.json}
    DIR/autoscaling/{register_scalable_target.json, put_scaling_policy.json}
    DIR/README.md

A vLLM candidate's deliverable is its `vllm serve` command line and Kubernetes manifests instead
(report/vllm_deliverable.py). Nothing here talks to AWS: the JSON files are request bodies for
`aws ... --cli-input-json` or boto3.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recommender.candidates import GENERATIVE_ENGINES, VLLM, Candidate, CandidateResult, RunStatus, model_fingerprint
from recommender.decide.autoscaling import ScalingPlan, plan_scaling
from recommender.decide.ranking import RankedCandidate
from recommender.decide.recommendation import Recommendation, endpoint_name_for
from recommender.errors import CandidateSkipped, ExportError, IncorrectExport
from recommender.files import paths
from recommender.files.destination import claim_folder, plain_name
from recommender.modelrepo.repository import candidate_repository, size_threads
from recommender.report.llamacpp_deliverable import write_llamacpp_deliverable
from recommender.report.vllm_deliverable import write_vllm_deliverable
from recommender.spec import ExperimentSpec
from recommender.targets import kserve

IMAGE_PLACEHOLDER = "<TRITON_SERVING_IMAGE_URI>"
ROLE_PLACEHOLDER = "<SAGEMAKER_EXECUTION_ROLE_ARN>"
MODEL_DATA_PLACEHOLDER = "s3://<BUCKET>/<PREFIX>/model.tar.gz"
INSTANCE_TYPE_PLACEHOLDER = "<ML_INSTANCE_TYPE>"
VARIANT_NAME = "AllTraffic"


@dataclass(frozen=True)
class ExportOptions:
    out_dir: Path
    position: int = 1
    cache_dir: Path = paths.ARTIFACTS
    image: str | None = None
    endpoint_name: str | None = None
    model_name: str = "model"
    force: bool = False  # write into a non-empty out_dir, replacing an earlier export there


@dataclass(frozen=True)
class Deliverable:
    """What was written, and the figures it was written for."""

    candidate: Candidate
    ranked: RankedCandidate
    out_dir: Path
    repository: Path | None  # the Triton model repository (None: a vLLM candidate, which serves a model folder)
    instance_type: str
    fleet_size: int  # InitialInstanceCount for the target load
    scaling: ScalingPlan
    files: tuple[Path, ...]
    served: Served | None = None


@dataclass(frozen=True)
class Served:
    """What served the measured run: its backend (run.backend) and accelerator, so the export serves it the same way."""

    backend: str | None  # e.g. python:onnxruntime or onnxruntime_onnx; None for a run stored before it was recorded
    accelerator: str = "cpu"

    @property
    def native(self) -> bool:
        return self.backend is not None and not self.backend.startswith("python:")

    @property
    def instance_kind(self) -> str:
        return "KIND_GPU" if self.accelerator == "gpu" else "KIND_CPU"

    @classmethod
    def of(cls, key: str, results: list[CandidateResult] | None) -> Served:
        found = next((r for r in results or () if r.key == key), None)
        if found is None:
            return cls(None)
        return cls(found.backend, (found.hardware or {}).get("accelerator") or "cpu")


def chosen(rec: Recommendation, position: int) -> RankedCandidate:
    """The ranked candidate at `position` (1 = the recommendation); ExportError when there is none."""
    if rec.winner is None:
        raise ExportError(
            f"experiment {rec.experiment!r} has no candidate to export: {rec.no_winner_reason}",
            hint="`recommender rank EXPERIMENT` lists every candidate with the reasons it was excluded",
        )
    picked = rec.candidate_at(position)
    if picked is None:
        count = len(rec.ranking.ranked)
        incorrect = [e for e in rec.ranking.excluded if e.candidate.status == RunStatus.INCORRECT]
        if incorrect:  # the rank asked for is past the ranked ones: the incorrect candidates are never among them
            raise IncorrectExport(
                f"rank {position} is out of range: {count} candidate(s) of {rec.experiment!r} ranked; "
                "incorrect candidates are never exported: "
                + "; ".join(f"{e.candidate.name} ({e.candidate.reason})" for e in incorrect),
                hint=f"pass --rank between 1 and {count}; `recommender rank {rec.experiment}` shows them",
            )
        raise ExportError(
            f"rank {position} is out of range: {count} candidate{'s' if count != 1 else ''} "
            f"of {rec.experiment!r} {'are' if count != 1 else 'is'} ranked",
            hint=f"pass --rank between 1 and {count}; `recommender rank {rec.experiment}` shows them",
        )
    return picked


def write_deliverable(
    rec: Recommendation, spec: ExperimentSpec, options: ExportOptions, results: list[CandidateResult] | None = None
) -> Deliverable:
    """Export the candidate ranked `options.position` into `options.out_dir`, served by the backend and on the
    accelerator its measured run used (from `results`, the stored runs; the Python backend on CPU without them)."""
    picked = chosen(rec, options.position)
    candidate = _checked_candidate(picked, spec)
    served = Served.of(picked.candidate.key, results)
    if candidate.optimization in GENERATIVE_ENGINES:
        out = claim_folder(options.out_dir, options.force)
        if candidate.optimization == VLLM:
            plan, written = write_vllm_deliverable(rec, spec, picked, out, options.image, served.accelerator)
        else:
            plan, written = write_llamacpp_deliverable(rec, spec, picked, out, options.image)
        return Deliverable(
            candidate, picked, out, None, rec.pricing.instance_type, plan.replicas, plan.scaling, written, served
        )
    plain_name(options.model_name, "model name")
    out = claim_folder(options.out_dir, options.force)
    repository = _emptied(out / "model_repository")
    _repository(spec, candidate, repository, rec, served, options)
    count = rec.fleets[picked.candidate.key].fleet_size
    endpoint = options.endpoint_name or endpoint_name_for(rec.experiment, candidate.name)
    scaling = _scaling(rec, picked, endpoint, spec)
    instance_type = (
        rec.pricing.instance_type if rec.pricing.instance_type.startswith("ml.") else INSTANCE_TYPE_PLACEHOLDER
    )
    bodies = _request_bodies(endpoint, options, instance_type, count, scaling)
    files = [_write_json(out / relative, body) for relative, body in bodies.items()]
    deliverable = Deliverable(candidate, picked, out, repository, instance_type, count, scaling, (), served)
    readme = out / "README.md"
    readme.write_text(readme_text(rec, deliverable, options))
    return replace(deliverable, files=(*files, readme))


def _scaling(rec: Recommendation, picked: RankedCandidate, endpoint: str, spec: ExperimentSpec) -> ScalingPlan:
    """The recommendation's scaling plan for its winner (addressed to this endpoint); a lower-ranked pick (--rank),
    which the recommendation plans nothing for, is planned the same way for itself."""
    winner = rec.ranking.winner
    if rec.scaling is not None and winner is not None and winner.candidate.key == picked.candidate.key:
        return replace(rec.scaling, endpoint_name=endpoint, variant_name=VARIANT_NAME)
    return plan_scaling(
        endpoint,
        picked.candidate.ipm,
        rec.target_ipm,
        variant_name=VARIANT_NAME,
        headroom=spec.capacity.autoscaling_headroom,
    )


def _repository(
    spec: ExperimentSpec, candidate: Candidate, root: Path, rec: Recommendation, served: Served, options: ExportOptions
) -> Path:
    """The candidate's self-contained repository, built as the pipeline builds it, for the backend it was measured
    with (a TensorRT engine needs this host's GPU: ExportError saying so where it is missing)."""
    try:
        return candidate_repository(
            spec,
            candidate,
            root,
            cache_dir=Path(options.cache_dir),
            model_name=options.model_name,
            threads_per_instance=_threads(rec, candidate),
            native=served.native,
            instance_kind=served.instance_kind,
            copy_artifact=True,
        )
    except CandidateSkipped as exc:
        raise ExportError(
            f"{candidate.name} cannot be exported on this host: {exc.message}",
            hint="export a TensorRT candidate on a host with the GPU model it was measured on",
        ) from exc


def _emptied(repository: Path) -> Path:
    """The repository folder of an earlier export removed (out_dir was claimed with --force, or is empty)."""
    if repository.is_symlink() or repository.is_file():
        repository.unlink()
    elif repository.is_dir():
        shutil.rmtree(repository)
    return repository


def _checked_candidate(picked: RankedCandidate, spec: ExperimentSpec) -> Candidate:
    candidate = Candidate.from_config(picked.candidate.config)
    if candidate.key != picked.candidate.key:
        raise ExportError(
            f"the stored configuration of {picked.candidate.name} does not rebuild to its key",
            hint="the store was written by another version of recommender; run the experiment again",
        )
    if candidate.model_fingerprint != model_fingerprint(spec):
        raise ExportError(
            f"{picked.candidate.name} was measured with a different model or sequence length than the "
            f"experiment file now stored for {spec.name!r}",
            hint="run the experiment again so that the stored results match its model",
        )
    return candidate


def _threads(rec: Recommendation, candidate: Candidate) -> int:
    """Intra-op threads per Triton instance sized for the deployment instance's vCPUs when the catalog knows them
    (else this host's cores); no core reserved: the deliverable serves without our load generator on its host."""
    hardware = rec.pricing.hardware
    return size_threads(candidate.instance_group_count, hardware.vcpus if hardware else None)


def _request_bodies(
    endpoint: str, options: ExportOptions, instance_type: str, count: int, scaling: ScalingPlan
) -> dict[str, dict[str, Any]]:
    config_name = f"{endpoint}-config"[:63]
    return {
        "sagemaker/create_model.json": {
            "ModelName": endpoint,
            "ExecutionRoleArn": ROLE_PLACEHOLDER,
            "PrimaryContainer": {
                "Image": options.image or IMAGE_PLACEHOLDER,
                "ModelDataUrl": MODEL_DATA_PLACEHOLDER,
                "Environment": {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": options.model_name},
            },
        },
        "sagemaker/create_endpoint_config.json": {
            "EndpointConfigName": config_name,
            "ProductionVariants": [
                {
                    "VariantName": VARIANT_NAME,
                    "ModelName": endpoint,
                    "InstanceType": instance_type,
                    "InitialInstanceCount": count,
                }
            ],
        },
        "sagemaker/create_endpoint.json": {"EndpointName": endpoint, "EndpointConfigName": config_name},
        "autoscaling/register_scalable_target.json": scaling.register_scalable_target_request(),
        "autoscaling/put_scaling_policy.json": scaling.put_scaling_policy_request(),
    }


def _write_json(path: Path, body: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(body, indent=2) + "\n")
    return path


def readme_text(rec: Recommendation, d: Deliverable, options: ExportOptions) -> str:
    """How to use the export: what it is, the figures behind it, the placeholders to fill, the commands."""
    c, s = d.ranked.candidate, d.scaling
    served = d.served or Served(None)
    placeholders = [ROLE_PLACEHOLDER, MODEL_DATA_PLACEHOLDER]
    if options.image is None:
        placeholders.append(IMAGE_PLACEHOLDER)
    if d.instance_type == INSTANCE_TYPE_PLACEHOLDER:
        placeholders.append(INSTANCE_TYPE_PLACEHOLDER)
    cost = (
        "unpriced (not free): set target.price_per_hour or target.priced_as"
        if rec.capacity is None
        else f"{rec.fleets[c.key].cost_per_hour:,.2f} USD/hour at {rec.pricing.price_per_hour:g} USD per instance-hour"
    )
    lines = [
        f"# {c.name} from experiment {rec.experiment}",
        "",
        f"Rank {d.ranked.rank} of {len(rec.ranking.ranked)} ranked candidates"
        + (
            f" (the recommendation is {rec.winner.candidate.name})."
            if rec.winner is not None and d.ranked.rank != 1
            else " (the recommendation)."
        ),
        "",
        rec.justification if d.ranked.rank == 1 else f"Compared with the recommendation: {d.ranked.comparison}.",
        "",
        "## Figures",
        "",
        f"- invocations per minute per instance: {c.invocations_per_minute:,.0f}",
        f"- {rec.percentile} latency: {c.model_latency_ms:,.1f} ms (threshold {rec.threshold_ms:g} ms)",
        f"- instance type: {d.instance_type}; InitialInstanceCount {d.fleet_size} for "
        f"{rec.target_ipm:,.0f} invocations per minute",
        f"- fleet cost: {cost}",
        f"- autoscaling: {s.min_capacity} to {s.max_capacity} instances, target tracking on "
        f"SageMakerVariantInvocationsPerInstance = {s.target_value:g} ({s.headroom:.0%} of MaxInvocations)",
        "",
        "## Contents",
        "",
        f"- `model_repository/{options.model_name}/`: the Triton model repository as benchmarked (config.pbtxt with "
        f"max_batch_size {d.candidate.max_batch_size}, dynamic batching "
        f"{'on' if d.candidate.dynamic_batching else 'off'}, instance_group count {d.candidate.instance_group_count} "
        f"{served.instance_kind}; {_served_by(served)}).",
        f"- Requests were sent with `padding: {d.candidate.padding}`: "
        f"{padding_note(d.candidate.padding, served.native)} Clients that pad otherwise send another workload than "
        "the one measured.",
        "- `sagemaker/create_model.json`, `create_endpoint_config.json`, `create_endpoint.json`: request bodies for "
        "the SageMaker API.",
        "- `autoscaling/register_scalable_target.json`, `put_scaling_policy.json`: request bodies for Application "
        "Auto Scaling.",
        "",
        "## Before you deploy",
        "",
        "Replace these placeholders in the JSON files: " + ", ".join(f"`{p}`" for p in placeholders) + ".",
        "",
        _image_needs(served)
        + " The image must follow SageMaker's Triton contract (`/ping` and `/invocations` on port 8080); "
        "the model it serves is named by `SAGEMAKER_TRITON_DEFAULT_MODEL_NAME`.",
        "",
        "## Deploy",
        "",
        "```sh",
        "tar -C model_repository -czf model.tar.gz .",
        "aws s3 cp model.tar.gz s3://<BUCKET>/<PREFIX>/model.tar.gz",
        "aws sagemaker create-model --cli-input-json file://sagemaker/create_model.json",
        "aws sagemaker create-endpoint-config --cli-input-json file://sagemaker/create_endpoint_config.json",
        "aws sagemaker create-endpoint --cli-input-json file://sagemaker/create_endpoint.json",
        f"aws sagemaker wait endpoint-in-service --endpoint-name {s.endpoint_name}",
        "aws application-autoscaling register-scalable-target "
        "--cli-input-json file://autoscaling/register_scalable_target.json",
        "aws application-autoscaling put-scaling-policy --cli-input-json file://autoscaling/put_scaling_policy.json",
        "```",
        "",
        "To try the repository locally first: `tritonserver --model-repository model_repository` and POST a KServe v2 "
        f"request to `{kserve.infer_path(options.model_name)}`.",
        "",
    ]
    return "\n".join(lines)


def padding_note(padding: str, native: bool) -> str:
    """How a client must pad its requests to send the workload a candidate of `padding` was measured on."""
    if padding == "buckets":
        return (
            "pad each request to the next power of two tokens, at most the payload's max length (requests of one "
            "bucket batch together)."
        )
    if padding == "none":
        batching = (
            "Triton's dynamic batcher batches requests of one length only (a native backend takes no ragged batch)."
            if native
            else "the config allows ragged batches and model.py pads them within the batch."
        )
        return f"send each request unpadded, at its own length; {batching}"
    return (
        "pad every request to the payload's max length (payload.sequence_length, or the payload's longest request "
        "where it is not set)."
    )


def _served_by(served: Served) -> str:
    if served.native:
        return f"Triton's native `{served.backend}` backend, as measured; a copy of the exported model file"
    return "the generic Python-backend `1/model.py`; a copy of the exported model file"


def _image_needs(served: Served) -> str:
    if served.native:
        return (
            f"The model runs in Triton's native `{served.backend}` backend, the one it was measured with: any NGC "
            "Triton image (containers/triton, or SageMaker's Triton image) has it."
        )
    return (
        "The model runs in Triton's Python backend: the serving image must have Triton with the Python backend and "
        "PyTorch (TorchScript artifacts), ONNX Runtime (ONNX artifacts), OpenVINO or TensorRT (of the release that "
        "built the engine) importable by the backend stub; containers/triton installs all four."
    )
