"""The target registry: a target name (an experiment file's `target.kind`) to its Target class (base.py: the protocol;
deployment.py: what deploy returns)."""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from recommender.errors import TargetError
from recommender.targets.base import Target
from recommender.targets.docker import DockerTarget
from recommender.targets.infinity import InfinityTarget
from recommender.targets.llamacpp import LlamaCppTarget
from recommender.targets.local import LocalTarget
from recommender.targets.remote import RemoteTarget
from recommender.targets.sagemaker import SageMakerTarget
from recommender.targets.vllm import VllmTarget

# Read-only: targets are added here, in code, not registered at run time.
TARGETS: Mapping[str, type] = MappingProxyType(
    {
        cls.name: cls
        for cls in (
            LocalTarget,
            DockerTarget,
            SageMakerTarget,
            RemoteTarget,
            InfinityTarget,
            VllmTarget,
            LlamaCppTarget,
        )
    }
)


def get_target(name: str, **options: Any) -> Target:
    """The target called `name`, built with `options`; TargetError for an unknown name or bad options."""
    target_class = _target_class(name)
    try:
        return target_class(**options)
    except TypeError as error:
        raise TargetError(f"invalid options for target {name!r}: {error}") from error


def target_for(target_spec: Any, experiment: str, run_id: str) -> Target:
    """The target an experiment file's `target` section describes; cloud resources are tagged with `run_id`."""
    return _target_class(target_spec.kind).from_spec(target_spec, experiment, run_id)


def _target_class(name: str) -> Any:  # a class with the Target protocol's constructors (from_spec)
    target_class = TARGETS.get(name)
    if target_class is None:
        close = difflib.get_close_matches(name, TARGETS, n=1)
        suggestion = f"did you mean {close[0]!r}? " if close else ""
        raise TargetError(f"unknown target {name!r}", hint=f"{suggestion}known targets: {', '.join(sorted(TARGETS))}")
    return target_class


__all__ = ["TARGETS", "get_target", "target_for"]
