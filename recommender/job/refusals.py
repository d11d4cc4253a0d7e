"""Why a candidate is skipped before anything is exported or started: an engine that cannot serve where its target
serves (missing, or TensorRT on the CPU), a configuration a native backend cannot serve, engine settings vLLM would
refuse at start (targets/vllm_rules.py). The job skips such a candidate with this reason, and `recommender plan` and
a run's money budget count it as skipped, not as one to measure.

    refusal(spec, candidate, native, gpus, engines) -> str | None      (the job: `engines` is the preflight's)
    planned_refusals(spec, candidates)              -> {key: reason}   (the plan: decided by configuration and
                                                                        placement; an engine not installed is
                                                                        `recommender doctor`'s and the preflight's)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from recommender.candidates import VLLM, Candidate, engine_settings, target_index
from recommender.doctor.engines import placement_refusal
from recommender.hardware import HardwareMissing, ServingHardware, serving_hardware
from recommender.modelrepo.llama import CONTEXT
from recommender.modelrepo.native import native_refusal
from recommender.spec import ExperimentSpec
from recommender.targets.registry import TARGETS
from recommender.targets.vllm_rules import refusal as vllm_refusal


def refusal(
    spec: ExperimentSpec, candidate: Candidate, native: bool, gpus: int | None, engines: Mapping[str, str]
) -> str | None:
    """Why `candidate` is not started (None: it is): `engines` says why an optimization cannot serve there (the
    preflight's engine_refusals); `native`: the target serves Triton's native backends; `gpus`: the GPUs a vLLM
    candidate is given (None on the CPU)."""
    if (missing := engines.get(candidate.optimization)) is not None:
        return missing
    if native and (refused := native_refusal(candidate)) is not None:
        return refused  # a configuration the image's backend cannot serve
    if candidate.optimization == VLLM:  # an engine configuration vLLM would refuse at start
        heads = getattr(spec.model.architecture, "heads", None)  # the Llama's, for tensor parallel
        return vllm_refusal(engine_settings(candidate.config()), gpus, CONTEXT, heads)
    return None


def planned_refusals(spec: ExperimentSpec, candidates: Iterable[Candidate]) -> dict[str, str]:
    """The candidates the job will skip before starting them, by key, with the reason it will give. A target whose
    hardware is refused (accelerator gpu without one) is the run's own error: none of its candidates is counted
    here."""
    placed: dict[int, tuple[ServingHardware, bool] | None] = {}
    found = {}
    for candidate in candidates:
        index = target_index(spec, candidate)
        if index not in placed:
            placed[index] = _placement(spec, index)
        where = placed[index]
        if where is None:
            continue
        serving, native = where
        engines = {o: why for o in (candidate.optimization,) if (why := placement_refusal(o, serving)) is not None}
        gpus = len(serving.hardware.gpus) if serving.accelerator == "gpu" and serving.hardware else None
        if (reason := refusal(spec, candidate, native, gpus, engines)) is not None:
            found[candidate.key] = reason
    return found


def _placement(spec: ExperimentSpec, index: int) -> tuple[ServingHardware, bool] | None:
    target = spec.all_targets[index]
    try:
        serving = serving_hardware(target)
    except HardwareMissing:
        return None
    return serving, bool(getattr(TARGETS.get(target.kind), "native_backends", False))


__all__ = ["planned_refusals", "refusal"]
