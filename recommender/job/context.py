"""What one `recommender run` works with, fixed before the first candidate starts: the run context, its targets
(placements), its options and the work items its loop hands out."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Protocol

from recommender.candidates import Candidate, RunStatus
from recommender.decide.budget import RunBudget
from recommender.files import paths
from recommender.hardware import Gpu, ServingHardware
from recommender.job.schedule import Slot, Stop
from recommender.job.tracking import Tracker
from recommender.search import Work
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.store.ledger import RunLedger

MODEL_NAME = "model"


@dataclass(frozen=True)
class Placement:
    """One target of the experiment, checked (preflight) and ready: what it serves on and its measurement protocol."""

    index: int  # in spec.all_targets
    spec: TargetSpec
    serving: ServingHardware
    protocol: str
    deploys: bool
    load_shares_host: bool
    target_name: str
    group: str  # schedule.slot_group: targets on the same hardware share its slots
    native_backends: bool = False  # the serving image (docker, sagemaker) serves Triton's native backends
    # optimization -> why its engine is missing here, with the install command (doctor/engines.py, at preflight)
    engine_refusals: Mapping[str, str] = field(default_factory=dict)

    @property
    def gpus(self) -> tuple[int, ...]:
        """The NVML indices of this host's GPUs the target serves on (none on the CPU or on a cloud machine)."""
        return tuple(gpu.index for gpu in self.gpus_for(None))

    def gpus_for(self, slot: Slot) -> tuple[Gpu, ...]:
        """The GPUs a candidate on `slot` is given: the slot's (a candidate pinned beside others), else every GPU the
        target serves on; none on the CPU or on a cloud machine."""
        hardware = self.serving.hardware
        if self.serving.accelerator != "gpu" or hardware is None:
            return ()
        return tuple(gpu for gpu in hardware.gpus if slot is None or gpu.index in slot)

    def serving_for(self, slot: Slot) -> ServingHardware:
        """What a candidate on `slot` serves on: the target's hardware with only the candidate's GPUs (gpus_for), so
        that its TensorRT engine is built on its own GPU, not on one another candidate is measured on."""
        hardware = self.serving.hardware
        if self.serving.accelerator != "gpu" or hardware is None:
            return self.serving
        return replace(self.serving, hardware=replace(hardware, gpus=self.gpus_for(slot)))


@dataclass(frozen=True)
class WorkItem:
    """One piece of the search's work on its candidate's target: what the job's loop hands to a candidate run."""

    work: Work
    placement: Placement
    index: int
    total: int

    @property
    def candidate(self) -> Candidate:
        return self.work.candidate


class Reporter(Protocol):
    """What the job tells its user as it goes (the CLI draws progress bars from this)."""

    def candidate_started(self, candidate: Candidate, index: int, total: int, load_seconds: float) -> None: ...

    def stage(self, candidate: Candidate, text: str) -> None: ...

    def load_progress(
        self, candidate: Candidate, elapsed_s: float, users: int, requests: int, failures: int
    ) -> None: ...

    def candidate_finished(self, candidate: Candidate, status: RunStatus, reason: str | None, reused: bool) -> None: ...


@dataclass(frozen=True)
class JobOptions:
    run_root: Path = paths.RUNS
    cache_dir: Path = paths.ARTIFACTS
    fresh: bool = False
    wait: bool = False  # wait for another job holding the experiment's lease instead of refusing


@dataclass(frozen=True)
class RunContext:
    """Everything a candidate run reads, built once by `Job.run` before any candidate starts."""

    spec: ExperimentSpec
    placements: tuple[Placement, ...]
    ledger: RunLedger
    budget: RunBudget
    deadline: float | None  # the monotonic clock reading after which no candidate starts (None: no time budget)
    stop: Stop
    options: JobOptions
    reporter: Reporter
    run_id: str  # this invocation's id (cloud resources are tagged with it)
    experiment_id: int
    export_lock: threading.Lock  # exports (and their imports of torch/transformers) run one at a time
    tracker: Tracker  # tracking.mlflow: the experiment sent after each candidate
    payload: dict | None = None  # what every run stores of the payload (job/protocol.stored_payload)
