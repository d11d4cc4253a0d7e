"""What an experiment file needs from this host, as checks: its targets (where they serve, the server, Docker, AWS),
the engine of each optimization on each target, the results database. Without a file: everything is shown, and
what the quickstart needs (Python, the Triton server, the `pt` engine, the database) decides the exit.

    doctor_checks(spec | None, db, hardware) -> [Check]
"""

from __future__ import annotations

from typing import Any

from recommender.doctor.check import Check, checked
from recommender.doctor.engines import engine_check
from recommender.doctor.host import (
    aws_check,
    database_check,
    docker_check,
    gpu_check,
    image_versions_check,
    llamacpp_check,
    nvidia_runtime_check,
    python_check,
    serving_image,
    triton_check,
    vllm_check,
)
from recommender.errors import TargetError
from recommender.hardware import DETECTED_KINDS, Hardware, ServingHardware, detect_hardware, serving_hardware
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.targets.docker import DEFAULT_IMAGE
from recommender.targets.registry import TARGETS

OPTIMIZATIONS = ("pt", "onnx", "openvino", "trt")
QUICKSTART = ("pt",)  # what `doctor` without a file requires: the quickstart's optimization on the local target


def doctor_checks(spec: ExperimentSpec | None, db: str | None, hardware: Hardware | None = None) -> list[Check]:
    """Every check for `spec` (None: this host in general), in the order a user fixes them."""
    hardware = hardware or detect_hardware()
    targets = spec.all_targets if spec else [TargetSpec(kind="local")]
    kinds = {target.kind for target in targets}
    checks = [python_check(), triton_check().needed_if("local" in kinds), gpu_check(hardware).needed_if(False)]
    for index, target in enumerate(targets):
        checks += _target_checks(spec, target, _label(index, target, len(targets)), hardware)
    if spec is None:
        checks += [check.needed_if(False) for check in _docker_checks(DEFAULT_IMAGE, "cpu")]
        checks.append(aws_check().needed_if(False))
    elif any(_on_aws(target) for target in targets):
        checks.append(aws_check())
    checks.append(database_check(db))
    return _unique(checks)


def _target_checks(spec: ExperimentSpec | None, target: TargetSpec, label: str, hardware: Hardware) -> list[Check]:
    """Where `target` serves (a gpu it does not have is refused here, as at the run's preflight), Docker for a docker
    target, and the engine of each optimization there."""
    serving = _serving(target, hardware)
    where = checked(label, lambda: f"serves on the {serving_hardware(target, hardware).accelerator.upper()}")
    checks = [where]
    if target.kind == "docker":
        checks += _docker_checks(target.image_uri or DEFAULT_IMAGE, serving.accelerator)
    if target.kind == "vllm":
        checks.append(vllm_check(target, serving.accelerator == "gpu"))
    if target.kind == "llamacpp":
        checks.append(llamacpp_check(target))
    target_class: Any = TARGETS[target.kind]  # a Target class: its ClassVars say how it serves
    if target_class.deploys:
        optimizations = spec.variants.optimizations if spec else OPTIMIZATIONS
        image_here = target.kind != "docker" or checks[1].passed  # its image is on a Docker engine that answers
        image = serving_image(target) if image_here else None
        # the docker image says which backends it serves (its labels); the NGC image's native ones when it cannot
        native = image.native if image is not None else target.kind == "docker" or target_class.native_backends
        for optimization in optimizations:
            check = engine_check(optimization, serving, native, target.kind, image)
            checks.append(check.needed_if(spec is not None or optimization in QUICKSTART))
    return checks


def _docker_checks(image: str, accelerator: str) -> list[Check]:
    engine = docker_check(image)
    if not engine.passed:
        return [engine]
    return [engine, nvidia_runtime_check().needed_if(accelerator == "gpu"), image_versions_check(image)]


def _serving(target: TargetSpec, hardware: Hardware) -> ServingHardware:
    """Where `target` serves; for one refused (gpu on a host or instance without one), the GPU it asks for, so that
    its engines are checked for what the file means."""
    try:
        return serving_hardware(target, hardware)
    except TargetError:
        detected = target.kind in DETECTED_KINDS
        return ServingHardware("gpu", hardware if detected else None, None if detected else target.instance_type)


def _on_aws(target: TargetSpec) -> bool:
    return target.kind == "sagemaker" or (target.kind == "remote" and (target.endpoint or "").startswith("sagemaker:"))


def _label(index: int, target: TargetSpec, count: int) -> str:
    name = f"target {target.kind} ({target.instance_type}, accelerator {target.accelerator})"
    return f"{index + 1}. {name}" if count > 1 else name


def _unique(checks: list[Check]) -> list[Check]:
    """Each check once (two targets of one kind check the same engines); needed if any copy is."""
    merged: dict[tuple[str, str], Check] = {}
    for check in checks:
        key = (check.name, check.found)
        merged[key] = check.needed_if(check.needed or (key in merged and merged[key].needed))
    return list(merged.values())
