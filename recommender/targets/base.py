"""The Target protocol every serving target implements; the Deployment it returns is deployment.py's base class."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from recommender.errors import TargetError
from recommender.hardware import Gpu
from recommender.targets.deployment import Deployment


class Target(Protocol):
    """Where candidates are deployed."""

    name: str
    deploys: bool  # False for a target that benchmarks an existing endpoint (no model is built or deployed)
    load_shares_host: bool  # True when the load generator runs on the serving host (one core is left to it)
    native_backends: bool  # True when the serving image runs Triton's native backends (else the Python-backend runner)

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> Target: ...  # from the spec's `target` section

    def cancel_on(self, event: threading.Event) -> None: ...  # a deploy still waiting stops once `event` is set

    def preflight(self) -> None: ...  # raises TargetError with a hint when the target cannot work here

    # returns once it serves; `repository` is None exactly for a target that does not deploy (`deploys` False);
    # `gpus`: this host's GPUs the model runs on (the candidate's), given to the server as CUDA devices 0..n-1;
    # `config`: the candidate's configuration (Candidate.config()), read by a target that serves without a repository
    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> Deployment: ...


def built(repository: Path | None) -> Path:
    """The model repository a deploying target was given (the job builds one for every target with `deploys`)."""
    if repository is None:
        raise TargetError("this target deploys a model repository, and none was built for it")
    return Path(repository)
