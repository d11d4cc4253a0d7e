"""Turn a SageMaker `CreateInferenceRecommendationsJob` request into a recommender experiment file.

What maps onto the experiment file (recommender/spec/) is converted; everything else is listed in
plain-English notes, so nothing in the job is silently dropped. The request is first checked against
the SageMaker API model that ships with botocore (types, required members), offline.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from recommender.destination import inside, plain_name, write_text
from recommender.document import load_json
from recommender.errors import SpecError
from recommender.vocabulary import DEFAULT_PERCENTILE, PERCENTILE_NAMES

OPERATION = "CreateInferenceRecommendationsJob"
MAX_PHASE_SECONDS = 7200  # the experiment file's limit per phase


@dataclass(frozen=True)
class ImportedJob:
    """An experiment-file mapping (ready for YAML) and what could not be carried over."""

    experiment: dict[str, Any]
    notes: list[str]


def read_job(path: str | Path) -> dict[str, Any]:
    """Load a request JSON file (as for `aws sagemaker create-inference-recommendations-job --cli-input-json`)."""
    request = load_json(path, "job request file", SpecError)
    if not isinstance(request, dict):
        raise SpecError(f"{path}: the top level must be a JSON object with JobName, JobType, RoleArn and InputConfig",
                        hint="Write the request as `aws sagemaker create-inference-recommendations-job "
                             "--generate-cli-skeleton` shows it.")
    return request


def validate_request(request: dict[str, Any]) -> None:
    """Check the request against botocore's SageMaker model; raise SpecError with one problem per line."""
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(OPERATION).input_shape
    report = ParamValidator().validate(request, shape)
    if report.has_errors():
        problems = [line.strip() for line in report.generate_report().splitlines() if line.strip()]
        raise SpecError(f"not a valid {OPERATION} request", problems,
                        hint="Compare with the request syntax in the SageMaker API reference for this operation.")


def import_job(request: dict[str, Any]) -> ImportedJob:
    """Convert a validated request into an experiment mapping plus notes for what did not map."""
    validate_request(request)
    plain_name(request["JobName"], "JobName")  # it names the experiment and, by default, its file
    config = request["InputConfig"]
    notes: list[str] = []
    experiment: dict[str, Any] = {
        "name": request["JobName"],
        "description": request.get("JobDescription") or f"Imported from SageMaker Inference Recommender job {request['JobName']}.",
        "target": _target(config.get("EndpointConfigurations", []), notes, request),
    }
    traffic = _traffic(request, notes)
    if traffic:
        experiment["traffic"] = traffic
    threshold = _latency_threshold(request.get("StoppingConditions", {}), notes)
    if threshold:
        experiment["latency_threshold"] = threshold
    notes.extend(_unmapped_notes(request))
    return ImportedJob(experiment, notes)


def write_experiment(imported: ImportedJob, path: str | Path, force: bool = False) -> Path:
    """Write the experiment as YAML through the emitter, the notes as its `notes:` list (never concatenated text);
    an existing file is replaced only with `force`."""
    document = {**imported.experiment, "notes": [f"Imported from a SageMaker {OPERATION} request.", *imported.notes]}
    return write_text(Path(path), yaml.safe_dump(document, sort_keys=False, allow_unicode=True), force)


def experiment_path(imported: ImportedJob, out: Path | None) -> Path:
    """Where the experiment goes: `out`, or <JobName>.yaml inside `out` when it is a folder (the working folder
    when `out` is None); the name never leaves that folder."""
    if out is not None and not out.is_dir():
        return out
    return inside(out or Path("."), f"{imported.experiment['name']}.yaml", "JobName")


def _target(configurations: list[dict[str, Any]], notes: list[str], request: dict[str, Any]) -> dict[str, Any]:
    endpoints = request["InputConfig"].get("Endpoints") or []
    if endpoints:
        name = endpoints[0]["EndpointName"]
        if len(endpoints) > 1:
            notes.append(f"{len(endpoints)} existing endpoints given; only {name} is benchmarked (one target per experiment file).")
        return {"kind": "remote", "endpoint": f"sagemaker://{name}"}
    types = [c["InstanceType"] for c in configurations if "InstanceType" in c]
    if types:
        notes.append(f"target.kind is `local` (instance_type kept as the hardware label): to run on SageMaker set "
                     f"kind: sagemaker with role_arn (the job's RoleArn was {request.get('RoleArn')}), bucket and image_uri.")
    for configuration in configurations:
        for parameter in configuration.get("EnvironmentParameterRanges", {}).get("CategoricalParameterRanges", []):
            notes.append(f"environment parameter {parameter['Name']} in {parameter['Value']} (for "
                         f"{configuration.get('InstanceType', 'an endpoint configuration')}) is not a variant axis here; "
                         "the closest knobs are variants.instance_group_counts and variants.max_batch_sizes.")
        if "ServerlessConfig" in configuration:
            notes.append("ServerlessConfig (serverless endpoints) is not supported; only real-time instances are benchmarked.")
        if "InferenceSpecificationName" in configuration:
            notes.append(f"InferenceSpecificationName {configuration['InferenceSpecificationName']} is ignored.")
    if len(types) > 1:
        notes.append(f"{len(types)} instance types given ({', '.join(types)}); an experiment has one target, so only "
                     f"{types[0]} was kept: make one experiment file per instance type to compare them.")
    return {"instance_type": types[0]} if types else {}


def _traffic(request: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    pattern = request["InputConfig"].get("TrafficPattern")
    if not pattern:
        if request.get("JobType", "Default") == "Default":
            notes.append("JobType Default (instance recommendation) has no traffic pattern: SageMaker chooses its own "
                         "load; the experiment file's default traffic is used.")
        return {}
    kind = pattern.get("TrafficType") or ("STAIRS" if "Stairs" in pattern and "Phases" not in pattern else "PHASES")
    if kind == "STAIRS":
        return {"phases": _stairs_as_phases(pattern["Stairs"], notes)}
    return {"phases": [_phase(phase, notes) for phase in pattern["Phases"]]}


def _phase(phase: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    seconds = phase["DurationInSeconds"]
    if seconds > MAX_PHASE_SECONDS:
        notes.append(f"a phase of {seconds} s was shortened to {MAX_PHASE_SECONDS} s, the longest phase allowed.")
        seconds = MAX_PHASE_SECONDS
    return {"initial_users": phase["InitialNumberOfUsers"], "spawn_rate": phase["SpawnRate"], "duration_seconds": seconds}


def _stairs_as_phases(stairs: dict[str, Any], notes: list[str]) -> list[dict[str, Any]]:
    steps, users, seconds = stairs["NumberOfSteps"], stairs["UsersPerStep"], stairs["DurationInSeconds"]
    notes.append(f"STAIRS traffic ({steps} steps of {users} more user(s), {seconds} s each) has no direct field in the "
                 "experiment file; it was written as one constant phase per step (users jump at each step boundary).")
    return [_phase({"InitialNumberOfUsers": users * step, "SpawnRate": 0, "DurationInSeconds": seconds}, notes)
            for step in range(1, steps + 1)]


def _latency_threshold(stopping: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    if "MaxInvocations" in stopping:
        notes.append(f"StoppingConditions.MaxInvocations {stopping['MaxInvocations']} (the most invocations per minute expected; "
                     "SageMaker stops the test there) has no field in the experiment file; the load runs its full phases.")
    if "FlatInvocations" in stopping:
        notes.append(f"StoppingConditions.FlatInvocations {stopping['FlatInvocations']} has no field in the experiment "
                     "file; the load is not stopped when invocations plateau.")
    thresholds = stopping.get("ModelLatencyThresholds", [])
    if not thresholds:
        return {}
    percentile = str(thresholds[0].get("Percentile", "P95")).lower()
    if percentile not in PERCENTILE_NAMES:
        notes.append(f"latency percentile {thresholds[0]['Percentile']} is not one of {', '.join(PERCENTILE_NAMES)}; "
                     f"{DEFAULT_PERCENTILE} used.")
        percentile = DEFAULT_PERCENTILE
    threshold: dict[str, Any] = {"percentile": percentile}
    if thresholds[0].get("ValueInMilliseconds"):
        threshold["ms"] = thresholds[0]["ValueInMilliseconds"]
    return threshold


# (where in the request, what the note says) for fields with no experiment-file equivalent
_IGNORED = (
    (("InputConfig", "ModelPackageVersionArn"), "the model package {} is not fetched; set model.source/model.path to the same model."),
    (("InputConfig", "ModelName"), "the SageMaker model {} is not fetched; set model.source/model.path to the same model."),
    (("InputConfig", "ContainerConfig"), "ContainerConfig (framework, sample payload, MIME types) is not used; set `payload` instead."),
    (("InputConfig", "JobDurationInSeconds"), "JobDurationInSeconds {} is not enforced; the duration is the sum of the phases per candidate."),
    (("InputConfig", "ResourceLimit", "MaxNumberOfTests"), "ResourceLimit.MaxNumberOfTests {} is not enforced; the variant grid decides how many candidates run."),
    (("InputConfig", "ResourceLimit", "MaxParallelOfTests"), "ResourceLimit.MaxParallelOfTests {} is ignored; candidates run one after another."),
    (("InputConfig", "VpcConfig"), "VpcConfig is ignored."),
    (("InputConfig", "VolumeKmsKeyId"), "VolumeKmsKeyId is ignored."),
    (("RoleArn",), "RoleArn {} is not part of an experiment file; the cloud target takes the role from its own settings."),
    (("OutputConfig",), "OutputConfig (compiled model output) is ignored."),
    (("Tags",), "Tags are not copied; cloud resources are tagged with recommender:run-id and recommender:experiment."),
)


def _unmapped_notes(request: dict[str, Any]) -> list[str]:
    notes = []
    for path, text in _IGNORED:
        value: Any = request
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value is not None:
            notes.append(text.format(_short(value)))
    return notes


def _short(value: Any) -> str:
    if isinstance(value, list) and value and isinstance(value[0], dict) and "EndpointName" in value[0]:
        return ", ".join(item["EndpointName"] for item in value)
    return str(value)
