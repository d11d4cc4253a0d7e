"""The main job: spec -> candidates (variants x targets) -> search -> build -> deploy -> load -> collect -> store.

The search strategy (search/) says what to measure and how much. Grid search knows every piece of work up front, so
its candidates run one at a time or up to `max_parallel` at once where they share no hardware (schedule.py);
adaptive search runs one candidate at a time, each result shaping the next question.

A candidate that cannot run is recorded (skipped or failed, with its reason) and the job goes on; a candidate
already stored under the same measurement protocol is not measured again unless `fresh` is set.
"""

from __future__ import annotations

import secrets
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from recommender.candidates import Candidate, CandidateResult, expand_candidates, target_index
from recommender.correctness.gate import Incorrect, check_outputs, judged_alike, precision_of
from recommender.decide.budget import BudgetExceeded, RunBudget, estimate_plan
from recommender.decide.verdicts import decide_result
from recommender.errors import CandidateSkipped, RecommenderError, interruption_reason
from recommender.files import paths
from recommender.hardware import ServingHardware, serving_hardware
from recommender.job.protocol import protocol_fingerprint
from recommender.job.schedule import Slot, SlotPool, Stop, run_all, slot_group, slots_for
from recommender.load.payload import inference_bodies
from recommender.load.shapes import traffic_seconds
from recommender.measurement.load_search import measure_work
from recommender.metrics.steady import Rules
from recommender.modelrepo.export import export_model
from recommender.modelrepo.repository import default_threads_per_instance, serving_backend, write_model_repository
from recommender.review import decided_from_store
from recommender.search import Work, strategy_for
from recommender.search.plan import planned_counts
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.store.results import BUDGET_SKIP, ResultStore
from recommender.targets.registry import target_for

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

    @property
    def gpus(self) -> tuple[int, ...]:
        hardware = self.serving.hardware
        return tuple(g.index for g in hardware.gpus) if self.serving.accelerator == "gpu" and hardware else ()


@dataclass(frozen=True)
class WorkItem:
    """One piece of the search's work on its candidate's target: what the job's loop hands to `Job._run_item`."""

    work: Work
    placement: Placement
    index: int
    total: int
    experiment_id: int

    @property
    def candidate(self) -> Candidate:
        return self.work.candidate


def time_limit(seconds: float | None) -> float | None:
    """The monotonic clock reading after which no candidate starts (None: no time budget)."""
    return None if seconds is None else time.monotonic() + seconds


class Reporter(Protocol):
    """What the job tells its user as it goes (the CLI draws progress bars from this)."""

    def candidate_started(self, candidate: Candidate, index: int, total: int, load_seconds: float) -> None: ...

    def stage(self, candidate: Candidate, text: str) -> None: ...

    def load_progress(
        self, candidate: Candidate, elapsed_s: float, users: int, requests: int, failures: int
    ) -> None: ...

    def candidate_finished(self, candidate: Candidate, status: str, reason: str | None, reused: bool) -> None: ...


@dataclass(frozen=True)
class JobOptions:
    run_root: Path = paths.RUNS
    cache_dir: Path = paths.ARTIFACTS
    fresh: bool = False
    wait: bool = False  # wait for another job holding the experiment's lease instead of refusing


@dataclass
class Job:
    spec: ExperimentSpec
    store: ResultStore
    options: JobOptions
    reporter: Reporter

    def run(self) -> list[CandidateResult]:
        """Measure every candidate not yet stored, holding the experiment's lease; returns the experiment's results."""
        with self.store.lease(self.spec.name, wait=self.options.wait):
            return self._run()

    def _run(self) -> list[CandidateResult]:
        candidates = expand_candidates(self.spec)
        strategy = strategy_for(self.spec, candidates)  # search/: which candidate next, and how much to measure it
        # refuses a plan estimated above the budget; counts what earlier runs of the experiment spent
        self.budget = RunBudget.for_spec(
            self.spec,
            planned_counts(self.spec, candidates),
            self.store.spent(self.spec.name),
            record=lambda usd: self.store.add_spend(self.spec.name, usd),
        )
        self.run_id = new_run_id()
        placements = [self._place(i, t) for i, t in enumerate(self.spec.all_targets)]  # every target checked first
        experiment_id = self.store.save_experiment(self.spec)
        self.bodies = inference_bodies(self.spec.payload)
        self.stop, self.deadline = Stop(), time_limit(self.spec.time_budget_seconds)
        self.export_lock = threading.Lock()  # exports (and their imports of torch/transformers) run one at a time
        self.placements, self.strategy, self.experiment_id = placements, strategy, experiment_id
        try:
            if strategy.independent:  # grid: every piece of work is known up front
                self._run_all([self._item(work, i, strategy.total) for i, work in enumerate(iter(strategy.ask, None))])
            else:
                self._search(strategy)
        except KeyboardInterrupt:
            self.store.set_experiment_status(self.spec.name, "interrupted")
            raise
        self.store.set_experiment_status(self.spec.name, "budget-exhausted" if self.budget.stopped else "done")
        return decided_from_store(self.store, self.spec.name, self.spec, {p.protocol for p in placements})

    def _place(self, index: int, spec: TargetSpec) -> Placement:
        """One target, preflighted, with the hardware it serves on and its measurement protocol."""
        target = target_for(spec, self.spec.name, self.run_id)
        target.preflight()
        serving = serving_hardware(spec)  # measured here (NVML), or declared by a cloud instance type
        protocol = protocol_fingerprint(self.spec, accelerator=serving.accelerator, target=spec)
        return Placement(
            index,
            spec,
            serving,
            protocol,
            target.deploys,
            target.load_shares_host,
            target.name,
            slot_group(spec, index),
            target.native_backends,
        )

    def _item(self, work: Work, index: int, total: int) -> WorkItem:
        placement = self.placements[target_index(self.spec, work.candidate)]
        return WorkItem(work, placement, index, total, self.experiment_id)

    def _run_all(self, items: list[WorkItem]) -> None:
        """Independent work through the slot pool: up to max_parallel at once where candidates share no hardware."""
        pool = SlotPool({p.group: slots_for(p.spec.kind, p.gpus, self.spec.max_parallel) for p in self.placements})
        run_all(items, self._run_item, lambda item: item.placement.group, pool, self.spec.max_parallel, self.stop)

    def _search(self, strategy) -> None:
        """Ask the strategy for work until it has none; tell it each candidate's result, decided under the spec."""
        index = 0
        while (work := strategy.ask()) is not None:
            item = self._item(work, index, max(strategy.total, index + 1))
            if work.stage == "prune":
                candidate_id = self.store.save_candidate(self.experiment_id, work.candidate)
                self.store.prune(candidate_id, item.placement.protocol, work.reason)
                self.reporter.candidate_finished(work.candidate, "pruned", work.reason, reused=False)
            else:
                self._run_item(item, None)
                index += 1
            strategy.tell(work, self._decided(work.candidate.key, item.placement.protocol))

    def _decided(self, key: str, protocol: str) -> CandidateResult:
        result = next(r for r in self.store.results(self.spec.name, protocol) if r.key == key)
        return decide_result(
            result, self.store.window_records(result.run_id) if result.run_id else [], Rules.from_spec(self.spec)
        )

    def _run_item(self, item: WorkItem, slot: Slot) -> None:
        """One work item: its candidate stored, then measured on its target (pinned to `slot`'s GPUs, if any)."""
        self.stop.check()
        candidate_id = self.store.save_candidate(item.experiment_id, item.candidate)
        self._run_candidate(item, candidate_id, slot)

    def _run_candidate(self, item: WorkItem, candidate_id: int, slot: Slot) -> None:
        candidate, placement, work = item.candidate, item.placement, item.work
        load_seconds = traffic_seconds(self.spec.traffic)
        self.reporter.candidate_started(candidate, item.index, item.total, load_seconds)
        stored = None if self.options.fresh else self.store.final_run(candidate_id, placement.protocol)
        if (
            stored is not None
            and _reusable(stored, work)
            and (
                stored.status == "skipped"
                or judged_alike(stored.correctness, self.spec, precision_of(candidate.config()))
            )
        ):
            self.reporter.candidate_finished(candidate, stored.status, stored.reason, reused=True)
            return
        run_dir = (
            self.options.run_root
            / self.spec.name
            / f"{candidate.name}-{candidate.key[:8]}{_SUFFIX.get(work.stage, '')}"
        )
        backend = serving_backend(candidate.optimization, placement.native_backends) if placement.deploys else None
        run_id = self.store.start_run(
            candidate_id,
            placement.protocol,
            str(run_dir.resolve()),
            hardware=placement.serving.to_dict(),
            backend=backend,
        )
        refusal = work.reason if work.stage == "skip" else self._refusal(item)
        if refusal is not None:  # recorded, not final: a raised budget measures it on the next run
            self._finish(candidate, run_id, "skipped", BUDGET_SKIP + refusal, budget_skipped=True)
            return

        def follow(probe: dict) -> Work | None:  # adaptive search, between the probe and the teardown
            nonlocal run_id
            then = self.strategy.follow(work, probe["headline"]) if work.stage == "probe" else None
            if then is not None:  # the probe stays stored as a run of its own; the full measurement gets the next
                self.store.finish_run(run_id, "ok", reason=then.reason, **probe)
                run_id = self.store.start_run(
                    candidate_id,
                    placement.protocol,
                    str((run_dir / "final").resolve()),
                    hardware=placement.serving.to_dict(),
                    backend=backend,
                )
            return then

        try:
            outcome = self._measure(item, run_dir, slot, follow)
        except CandidateSkipped as exc:
            self._finish(candidate, run_id, "skipped", exc.message)
        except Incorrect as exc:  # not loaded: measuring a variant that computes something else would waste the time
            self._finish(candidate, run_id, "incorrect", exc.message, correctness=exc.correctness.to_dict())
        except BudgetExceeded as exc:  # the deployment was torn down on the way out; later candidates are refused
            self._finish(candidate, run_id, "interrupted", BUDGET_SKIP + exc.message, budget_skipped=True)
        except RecommenderError as exc:
            self._finish(candidate, run_id, "failed", one_line_reason(exc, run_dir))
        except KeyboardInterrupt as interrupt:  # Ctrl-C, SIGTERM or SIGHUP (errors.Interrupted), or the job's stop
            self._finish(candidate, run_id, "interrupted", interruption_reason(interrupt))
            raise
        except OSError as exc:  # the system refused (a full disk, a read-only run directory): one line, go on
            self._finish(candidate, run_id, "failed", f"operating system error: {exc}")
        except Exception as exc:  # a bug or an unforeseen failure: record it, keep the traceback, go on
            kept = keep_details(run_dir, traceback.format_exc())
            self._finish(
                candidate,
                run_id,
                "failed",
                f"unexpected error {exc!r} ({f'traceback in {kept}' if kept else 'no traceback kept'})",
            )
        else:
            self.store.finish_run(run_id, "ok", **outcome)
            self.reporter.candidate_finished(candidate, "ok", None, reused=False)
        finally:
            self.budget.release()

    def _refusal(self, item: WorkItem) -> str | None:
        """Why this candidate may not start (max_candidates, the time budget, the money budget), or None; an
        admitted candidate's estimated cost is held back from the budget until it is done."""
        cap = self.spec.max_candidates
        if cap is not None and item.index >= cap:
            return f"max_candidates is {cap} and this is candidate {item.index + 1} of {item.total}; raise it to measure this one"
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return (
                f"the time budget of {self.spec.time_budget_seconds:g} s (time_budget_seconds) was used up before "
                "this candidate started; raise it or run again to measure it"
            )
        return self.budget.admit(estimate_plan(self.spec, 1, item.placement.spec).usd)

    def _finish(
        self,
        candidate: Candidate,
        run_id: int,
        status: str,
        reason: str,
        correctness: dict | None = None,
        budget_skipped: bool = False,
    ) -> None:
        self.store.finish_run(run_id, status, reason=reason, correctness=correctness, budget_skipped=budget_skipped)
        self.reporter.candidate_finished(candidate, status, reason, reused=False)

    def _measure(self, item: WorkItem, run_dir: Path, slot: Slot, follow: Callable[[dict], Work | None]) -> dict:
        """Deploy, check, load as the work asks; `follow` may ask for more on the same deployment (adaptive search)."""
        spec, candidate, placement = self.spec, item.candidate, item.placement
        target = target_for(
            placement.spec, spec.name, self.run_id
        )  # one per candidate: concurrent ones share no client
        if hasattr(target, "cancel"):
            target.cancel = self.stop.event  # a SageMaker endpoint still starting stops waiting when the job stops
        with self.export_lock:  # the cache and the exporters' lazy imports are not safe across threads
            repository = self._repository(candidate, run_dir, placement, slot) if placement.deploys else None
        self.stop.check()
        self.reporter.stage(candidate, f"deploying on {placement.target_name} ({placement.spec.instance_type})")
        estimate = estimate_plan(spec, 1, placement.spec)
        with (
            self.budget.billed(estimate.price_per_hour, estimate.endpoint_instance_count),
            target.deploy(repository, MODEL_NAME, run_dir) as deployment,
        ):
            deployment.probe(self.bodies[0])
            correctness = {"correctness": self._check(candidate, deployment).to_dict()}
            fields = self._load(candidate, deployment, item.work, run_dir) | correctness
            then = follow(fields)
            if then is not None:
                self.reporter.stage(candidate, f"measuring in full on the same deployment ({then.repeats} repeats)")
                fields = (
                    self._load(candidate, deployment, then, run_dir / "final") | correctness | {"reason": then.reason}
                )
        return fields

    def _load(self, candidate: Candidate, deployment, work: Work, run_dir: Path) -> dict:
        self.reporter.stage(candidate, "load")

        def progress(p) -> None:
            self.stop.check()  # an interrupted job: the generator stops and the deployment is torn down
            self.budget.check()  # BudgetExceeded stops the generator and tears the deployment down
            self.reporter.load_progress(candidate, p.elapsed_s, p.users, p.requests, p.failures)

        started = datetime.now(UTC)
        with deployment.watched():  # a server or stub that dies during the load fails the candidate
            fields = measure_work(work, deployment, self.spec, self.bodies, run_dir / "load", progress).store_fields()
        cloud = deployment.cloud_metrics(started, datetime.now(UTC))
        if cloud:
            fields["server_stats"] = {**(fields.get("server_stats") or {}), "cloudwatch": cloud}
        return fields

    def _check(self, candidate: Candidate, deployment):
        """The correctness gate; raises Incorrect (before any load) when the outputs are outside tolerance."""
        self.reporter.stage(candidate, "checking outputs against the reference")
        correctness = check_outputs(deployment, self.spec, candidate.max_batch_size, precision_of(candidate.config()))
        if not correctness.passed:
            raise Incorrect(correctness)
        return correctness

    def _repository(self, candidate: Candidate, run_dir: Path, placement: Placement, slot: Slot) -> Path:
        spec = self.spec
        self.reporter.stage(candidate, f"exporting {candidate.optimization}")
        artifact = export_model(
            spec.model,
            candidate.optimization,
            spec.payload.sequence_length,
            candidate.model_fingerprint,
            self.options.cache_dir,
            candidate.precision,
            candidate.max_batch_size,
            placement.serving,
        )
        native = spec.payload.sequence_length if placement.native_backends else None
        reserved = 1 if placement.load_shares_host else 0
        threads = default_threads_per_instance(candidate.instance_group_count, reserved)
        gpu = placement.serving.accelerator == "gpu"
        gpus = (slot or placement.gpus) if gpu else ()  # a parallel candidate is pinned to its slot's GPU
        return write_model_repository(
            candidate,
            artifact,
            run_dir / "repository",
            MODEL_NAME,
            threads_per_instance=threads,
            instance_kind="KIND_GPU" if gpu else "KIND_CPU",
            gpus=gpus,
            native_sequence_length=native,
        )


_SUFFIX = {"probe": "-probe", "final": "-final"}  # adaptive search: each stage's artifacts in a folder of its own


def _reusable(stored, work: Work) -> bool:
    """A stored run answers the work unless the work needs more repeats than it has (adaptive search's final stage)."""
    if stored.status == "pruned":  # a candidate back in the race is measured in full
        return work.stage != "final"
    return stored.status != "ok" or (stored.headline or {}).get("repeats", 1) >= work.repeats


def one_line_reason(error: RecommenderError, run_dir: Path) -> str:
    """The failure's first line; the whole message and hint (a log tail, a stderr tail) go to run_dir/error.txt."""
    first, *rest = error.message.splitlines() or [""]
    hint = error.hint or ""
    if not rest and "\n" not in hint:
        return first + (f" (hint: {hint})" if hint else "")
    kept = keep_details(run_dir, f"{error.message}\n\nhint: {hint}\n")
    return f"{first} (details in {kept})" if kept else f"{first} (details not kept: cannot write in {run_dir})"


def keep_details(run_dir: Path, text: str) -> Path | None:
    """Write run_dir/error.txt; None when the file system refuses (a full disk must not replace the failure)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "error.txt").write_text(text)
    except OSError:
        return None
    return run_dir / "error.txt"


def new_run_id() -> str:
    """Identifies one `recommender run` invocation (cloud resources are tagged with it), e.g. 20250101t120000-a1b2."""
    return f"{datetime.now(UTC):%Y%m%dt%H%M%S}-{secrets.token_hex(2)}"
