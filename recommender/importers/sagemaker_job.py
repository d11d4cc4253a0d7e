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

from recommender.errors import SpecError
from recommender.files.destination import claim_folder, inside, plain_name, write_text
from recommender.files.document import load_json
from recommender.vocabulary import DEFAULT_PERCENTILE, PERCENTILE_NAMES

OPERATION = "CreateInferenceRecommendationsJob"
MAX_PHASE_SECONDS = 7200  # the experiment file's limit per phase
MAX_PARALLEL = 64  # the experiment file's limit on max_parallel
DEFAULT_REGION = "us-east-1"  # the experiment file's default region, where catalog prices are looked up


@dataclass(frozen=True)
class ImportedJob:
    """An experiment-file mapping (ready for YAML) and what could not be carried over."""

    experiment: dict[str, Any]
    notes: list[str]


def read_job(path: str | Path) -> dict[str, Any]:
    """Load a request JSON file (as for `aws sagemaker create-inference-recommendations-job --cli-input-json`)."""
    request = load_json(path, "job request file", SpecError)
    if not isinstance(request, dict):
        raise SpecError(
            f"{path}: the top level must be a JSON object with JobName, JobType, RoleArn and InputConfig",
            hint="Write the request as `aws sagemaker create-inference-recommendations-job "
            "--generate-cli-skeleton` shows it.",
        )
    return request


def validate_request(request: dict[str, Any]) -> None:
    """Check the request against botocore's SageMaker model; raise SpecError with one problem per line."""
    import botocore.session
    from botocore.validate import ParamValidator

    shape = botocore.session.get_session().get_service_model("sagemaker").operation_model(OPERATION).input_shape
    report = ParamValidator().validate(request, shape)
    if report.has_errors():
        problems = [line.strip() for line in report.generate_report().splitlines() if line.strip()]
        raise SpecError(
            f"not a valid {OPERATION} request",
            problems,
            hint="Compare with the request syntax in the SageMaker API reference for this operation.",
        )


def import_job(request: dict[str, Any]) -> ImportedJob:
    """Convert a validated request into an experiment mapping plus notes for what did not map."""
    validate_request(request)
    plain_name(request["JobName"], "JobName")  # it names the experiment and, by default, its file
    config = request["InputConfig"]
    notes: list[str] = []
    experiment: dict[str, Any] = {
        "name": request["JobName"],
        "description": request.get("JobDescription")
        or f"Imported from SageMaker Inference Recommender job {request['JobName']}.",
        **_targets(config.get("EndpointConfigurations", []), notes, request),
        **_limits(config, notes),
    }
    traffic = _traffic(request, notes)
    stopping = _stopping(request.get("StoppingConditions", {}))
    if traffic or stopping:
        experiment["traffic"] = {**traffic, **({"stopping": stopping} if stopping else {})}
    threshold = _latency_threshold(request.get("StoppingConditions", {}), notes)
    if threshold:
        experiment["latency_threshold"] = threshold
    notes.extend(_unmapped_notes(request))
    _note_capped_grid(experiment, notes)
    return ImportedJob(experiment, notes)


def write_experiment(imported: ImportedJob, path: str | Path, force: bool = False) -> Path:
    """Write the experiment as YAML through the emitter, the notes as its `notes:` list (never concatenated text);
    an existing file is replaced only with `force`."""
    document = {**imported.experiment, "notes": [f"Imported from a SageMaker {OPERATION} request.", *imported.notes]}
    return write_text(Path(path), yaml.safe_dump(document, sort_keys=False, allow_unicode=True), force)


def experiment_path(imported: ImportedJob, out: Path | None, force: bool = False) -> Path:
    """Where the experiment goes: `out`, or <JobName>.yaml inside `out` when it is a folder (the working folder
    when `out` is None); the name never leaves that folder. A folder given as `out` must be empty (or `force`), as
    every command's output folder: outputs never land among other files unasked."""
    if out is not None and not out.is_dir():
        return out
    if out is not None:
        claim_folder(out, force)
    return inside(out or Path("."), f"{imported.experiment['name']}.yaml", "JobName")


def _targets(configurations: list[dict[str, Any]], notes: list[str], request: dict[str, Any]) -> dict[str, Any]:
    """Every existing endpoint (a remote target each) or every instance type (a local target priced as that type)."""
    endpoints = [e["EndpointName"] for e in request["InputConfig"].get("Endpoints") or []]
    if endpoints:
        targets = [
            {"name": plain_name(name, "Endpoints[].EndpointName"), "kind": "remote", "endpoint": f"sagemaker://{name}"}
            for name in dict.fromkeys(endpoints)
        ]
        return (
            {"target": {k: v for k, v in targets[0].items() if k != "name"}}
            if len(targets) == 1
            else {"targets": targets}
        )
    types = list(dict.fromkeys(c["InstanceType"] for c in configurations if "InstanceType" in c))
    for configuration in configurations:
        _note_configuration(configuration, notes)
    if not types:
        return {}
    notes.append(
        f"each instance type is a `local` target priced as that type ({', '.join(types)}; instance_type is the "
        f"hardware label): to run on SageMaker set kind: sagemaker with role_arn (the job's RoleArn was "
        f"{request.get('RoleArn')}), bucket and image_uri on each target."
    )
    targets = [_priced_target(t, notes) for t in types]
    return {"target": targets[0]} if len(targets) == 1 else {"targets": targets}


def _priced_target(instance_type: str, notes: list[str]) -> dict[str, Any]:
    """A local target labelled and priced as the SageMaker type (when the price catalog knows it, else a note)."""
    from recommender.decide.prices import find_price
    from recommender.errors import CostError

    try:
        find_price(instance_type, DEFAULT_REGION)
    except CostError:
        notes.append(
            f"{instance_type} is not in the price catalog: set price_per_hour on its target (or add it with "
            "`recommender prices`) or its costs stay unpriced."
        )
        return {"instance_type": instance_type}
    return {"instance_type": instance_type, "priced_as": instance_type}


def _note_configuration(configuration: dict[str, Any], notes: list[str]) -> None:
    where = configuration.get("InstanceType", "an endpoint configuration")
    ranges = configuration.get("EnvironmentParameterRanges", {}).get("CategoricalParameterRanges", [])
    for parameter in ranges:  # the experiment file has no environment axis: Triton's own knobs are the variants
        notes.append(
            f"environment parameter {parameter['Name']} in {parameter['Value']} (for {where}) is not a variant "
            "axis here; the closest knobs are variants.instance_group_counts and variants.max_batch_sizes."
        )
    if "ServerlessConfig" in configuration:
        notes.append(
            "ServerlessConfig (serverless endpoints) is not supported; only real-time instances are benchmarked."
        )
    if "InferenceSpecificationName" in configuration:
        notes.append(f"InferenceSpecificationName {configuration['InferenceSpecificationName']} is ignored.")


def _limits(config: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """ResourceLimit and JobDurationInSeconds: max_parallel, max_candidates, time_budget_seconds."""
    limit = config.get("ResourceLimit", {})
    fields = {
        "max_parallel": limit.get("MaxParallelOfTests"),
        "max_candidates": limit.get("MaxNumberOfTests"),
        "time_budget_seconds": config.get("JobDurationInSeconds"),
    }
    if fields["max_parallel"] is not None and fields["max_parallel"] > MAX_PARALLEL:
        notes.append(
            f"MaxParallelOfTests {fields['max_parallel']} was lowered to {MAX_PARALLEL}, the most max_parallel allows."
        )
        fields["max_parallel"] = MAX_PARALLEL
    if fields["max_parallel"] is not None and fields["max_parallel"] > 1:
        notes.append(
            f"max_parallel {fields['max_parallel']} (MaxParallelOfTests): SageMaker targets and remote hosts run "
            "that many candidates at once; local CPU targets still run one at a time (contention)."
        )
    return {name: value for name, value in fields.items() if value is not None}


def _note_capped_grid(experiment: dict[str, Any], notes: list[str]) -> None:
    """A note when MaxNumberOfTests (max_candidates) is below the number of candidates the file expands to."""
    cap = experiment.get("max_candidates")
    if cap is None:
        return
    from recommender.candidates import expand_candidates
    from recommender.spec import ExperimentSpec

    total = len(expand_candidates(ExperimentSpec.model_validate(experiment)))
    if total > cap:
        notes.append(
            f"MaxNumberOfTests {cap} caps the candidates (max_candidates): the grid has {total}, so the last "
            f"{total - cap} in grid order are recorded skipped; widen the cap or trim the variant grid."
        )


def _traffic(request: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    pattern = request["InputConfig"].get("TrafficPattern")
    if not pattern:
        if request.get("JobType", "Default") == "Default":
            notes.append(
                "JobType Default (instance recommendation) has no traffic pattern: SageMaker chooses its own "
                "load; the experiment file's default traffic is used."
            )
        return {}
    kind = pattern.get("TrafficType") or ("STAIRS" if "Stairs" in pattern and "Phases" not in pattern else "PHASES")
    if kind == "STAIRS":
        stairs = pattern["Stairs"]
        return {
            "stairs": {
                "users_per_step": stairs["UsersPerStep"],
                "number_of_steps": stairs["NumberOfSteps"],
                "duration_seconds": min(stairs["DurationInSeconds"], MAX_PHASE_SECONDS),
            }
        }
    return {"phases": [_phase(phase, notes) for phase in pattern["Phases"]]}


def _phase(phase: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    seconds = phase["DurationInSeconds"]
    if seconds > MAX_PHASE_SECONDS:
        notes.append(f"a phase of {seconds} s was shortened to {MAX_PHASE_SECONDS} s, the longest phase allowed.")
        seconds = MAX_PHASE_SECONDS
    return {
        "initial_users": phase["InitialNumberOfUsers"],
        "spawn_rate": phase["SpawnRate"],
        "duration_seconds": seconds,
    }


def _stopping(stopping: dict[str, Any]) -> dict[str, Any]:
    """StoppingConditions -> traffic.stopping: MaxInvocations, FlatInvocations Stop; a latency threshold stops the
    load where it is breached (traffic.stopping.latency, on by default)."""
    mapped: dict[str, Any] = {}
    if stopping.get("MaxInvocations"):
        mapped["max_invocations"] = stopping["MaxInvocations"]
    if stopping.get("FlatInvocations") == "Stop":
        mapped["flat_invocations"] = True
    return mapped


def _latency_threshold(stopping: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    thresholds = stopping.get("ModelLatencyThresholds", [])
    if not thresholds:
        return {}
    if len(thresholds) > 1:
        notes.append(
            f"{len(thresholds)} ModelLatencyThresholds given; the experiment file has one latency threshold, "
            f"so the first ({thresholds[0].get('Percentile')}) is used."
        )
    percentile = str(thresholds[0].get("Percentile", "P95")).lower()
    if percentile not in PERCENTILE_NAMES:
        notes.append(
            f"latency percentile {thresholds[0]['Percentile']} is not one of {', '.join(PERCENTILE_NAMES)}; "
            f"{DEFAULT_PERCENTILE} used."
        )
        percentile = DEFAULT_PERCENTILE
    threshold: dict[str, Any] = {"percentile": percentile}
    if thresholds[0].get("ValueInMilliseconds"):
        threshold["ms"] = thresholds[0]["ValueInMilliseconds"]
    return threshold


# (where in the request, what the note says) for fields with no experiment-file equivalent
_IGNORED = (
    (
        ("InputConfig", "ModelPackageVersionArn"),
        "the model package {} is not fetched; set model.source/model.path to the same model.",
    ),
    (
        ("InputConfig", "ModelName"),
        "the SageMaker model {} is not fetched; set model.source/model.path to the same model.",
    ),
    (
        ("InputConfig", "ContainerConfig"),
        "ContainerConfig (framework, MIME types) is not used; the requests are `payload`'s.",
    ),
    (
        ("InputConfig", "ContainerConfig", "PayloadConfig", "SamplePayloadUrl"),
        "the sample payload {} is not fetched: copy it here (`aws s3 cp`) and set `payload.file` to the .tar.gz "
        '(README "Your own payload").',
    ),
    (("InputConfig", "VpcConfig"), "VpcConfig is ignored."),
    (("InputConfig", "VolumeKmsKeyId"), "VolumeKmsKeyId is ignored."),
    (
        ("RoleArn",),
        "RoleArn {} is not part of an experiment file; the cloud target takes the role from its own settings.",
    ),
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
