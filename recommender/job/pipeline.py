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
from dataclasses import dataclass
from datetime import UTC, datetime

from recommender.candidates import CandidateResult, RunStatus, expand_candidates, target_index
from recommender.decide.budget import RunBudget
from recommender.decide.verdicts import decide_result
from recommender.doctor.engines import engine_refusals
from recommender.doctor.host import serving_image
from recommender.hardware import serving_hardware
from recommender.job.candidate_run import CandidateRun
from recommender.job.context import JobOptions, Placement, Reporter, RunContext, WorkItem
from recommender.job.protocol import protocol_fingerprint, stored_sent
from recommender.job.refusals import planned_refusals
from recommender.job.schedule import Slot, SlotPool, Stop, group_slots, run_all, slot_group
from recommender.job.tiebreak import TieBreak
from recommender.job.tracking import Tracker
from recommender.metrics.rules import Rules
from recommender.review import decided_from_store
from recommender.search import Work, strategy_for
from recommender.search.plan import planned_counts
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.store.ledger import RunLedger
from recommender.store.results import ExperimentStatus, ResultStore
from recommender.targets.registry import target_for

__all__ = ["Job", "JobOptions", "Placement", "Reporter", "new_run_id", "time_limit"]


def time_limit(seconds: float | None) -> float | None:
    """The monotonic clock reading after which no candidate starts (None: no time budget)."""
    return None if seconds is None else time.monotonic() + seconds


@dataclass(frozen=True)
class Job:
    spec: ExperimentSpec
    store: ResultStore
    options: JobOptions
    reporter: Reporter

    def run(self) -> list[CandidateResult]:
        """Measure every candidate not yet stored, holding the experiment's lease; returns the experiment's results."""
        with self.store.lease(self.spec.name, wait=self.options.wait):
            candidates = expand_candidates(self.spec)
            strategy = strategy_for(self.spec, candidates)  # search/: which candidate next, and how much to measure
            # the money budget is checked against the candidates it may start (not those skipped before: no cost)
            context = self._context(planned_counts(self.spec, candidates, planned_refusals(self.spec, candidates)))
            try:
                if strategy.independent:  # grid: every piece of work is known up front
                    items = [_item(context, work, i, strategy.total) for i, work in enumerate(iter(strategy.ask, None))]
                    self._run_all(context, items, strategy.follow)
                else:
                    self._search(context, strategy)
                protocols = {p.protocol for p in context.placements}
                if not context.budget.stopped:  # #1 and #2 tied: measured more while it may help (decision:)
                    TieBreak(context, self.store, frozenset(protocols)).run()
            except KeyboardInterrupt:
                self.store.set_experiment_status(self.spec.name, ExperimentStatus.INTERRUPTED)
                raise
            status = ExperimentStatus.BUDGET_EXHAUSTED if context.budget.stopped else ExperimentStatus.DONE
            self.store.set_experiment_status(self.spec.name, status)
            context.tracker.send()  # the final ranks and verdicts (a failure was said after a candidate)
            return decided_from_store(self.store, self.spec.name, self.spec, protocols)

    def _context(self, planned) -> RunContext:
        """The run's context, built once: the budget (refusing a plan estimated above it; counting what earlier runs
        of the experiment spent), every target checked first, the experiment stored."""
        budget = RunBudget.for_spec(
            self.spec,
            planned,
            self.store.spent(self.spec.name),
            record=lambda usd: self.store.add_spend(self.spec.name, usd),
        )
        run_id = new_run_id()
        payload = stored_sent(
            self.spec
        ).to_dict()  # the user's file read, the prompts made (or refused) before any store
        placements = tuple(self._place(i, t, run_id) for i, t in enumerate(self.spec.all_targets))
        experiment_id = self.store.save_experiment(self.spec)
        return RunContext(
            spec=self.spec,
            placements=placements,
            ledger=RunLedger(self.store),
            budget=budget,
            deadline=time_limit(self.spec.time_budget_seconds),
            stop=Stop(),
            options=self.options,
            reporter=self.reporter,
            run_id=run_id,
            experiment_id=experiment_id,
            export_lock=threading.Lock(),
            tracker=Tracker(self.spec.tracking.mlflow, self.store, self.spec.name),
            payload=payload,
        )

    def _place(self, index: int, spec: TargetSpec, run_id: str) -> Placement:
        """One target, preflighted, with the hardware it serves on, the engines missing there and its measurement
        protocol. This target only answers the preflight; each candidate builds its own (concurrent candidates share
        no client)."""
        target = target_for(spec, self.spec.name, run_id)
        target.preflight()
        serving = serving_hardware(spec)  # measured here (NVML), or declared by a cloud instance type
        optimizations = self.spec.variants.optimizations if target.deploys else ()
        image = serving_image(spec) if "trt" in optimizations else None  # the TensorRT an engine must be built with
        protocol = protocol_fingerprint(self.spec, accelerator=serving.accelerator, target=spec, host=serving.hardware)
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
            engine_refusals(optimizations, serving, target.native_backends, image),
        )

    def _run_all(self, context: RunContext, items: list[WorkItem], follow) -> None:
        """Independent work through the slot pool: up to max_parallel at once where candidates share no hardware."""
        parallel = self.spec.max_parallel
        pool = SlotPool(group_slots([(p.group, p.spec.kind, p.gpus) for p in context.placements], parallel))

        def run_item(item: WorkItem, slot: Slot) -> None:
            self._run_item(context, item, slot, follow)

        run_all(items, run_item, lambda item: item.placement.group, pool, parallel, context.stop)

    def _search(self, context: RunContext, strategy) -> None:
        """Ask the strategy for work until it has none; tell it each candidate's result, decided under the spec."""
        indexes: dict[str, int] = {}  # candidate key -> its place among the candidates measured (a final keeps it)
        while (work := strategy.ask()) is not None:
            index = indexes.get(work.candidate.key, len(indexes))
            item = _item(context, work, index, max(strategy.total, index + 1))
            if work.stage == "prune":
                candidate_id = self.store.save_candidate(context.experiment_id, work.candidate)
                context.ledger.prune(candidate_id, item.placement.protocol, work.reason)
                self.reporter.candidate_finished(work.candidate, RunStatus.PRUNED, work.reason, reused=False)
            else:
                indexes[work.candidate.key] = index
                self._run_item(context, item, None, strategy.follow)
            strategy.tell(work, self._decided(work.candidate.key, item.placement.protocol))

    def _decided(self, key: str, protocol: str) -> CandidateResult:
        result = next(r for r in self.store.results(self.spec.name, protocol) if r.key == key)
        return decide_result(
            result, self.store.window_records(result.run_id) if result.run_id else [], Rules.from_spec(self.spec)
        )

    def _run_item(self, context: RunContext, item: WorkItem, slot: Slot, follow) -> None:
        """One work item: its candidate stored, then measured on its target (pinned to `slot`'s GPUs, if any)."""
        context.stop.check()
        candidate_id = self.store.save_candidate(context.experiment_id, item.candidate)
        CandidateRun(context, item, candidate_id, slot, follow).run()
        if (note := context.tracker.send()) is not None:
            self.reporter.stage(item.candidate, note)


def _item(context: RunContext, work: Work, index: int, total: int) -> WorkItem:
    placement = context.placements[target_index(context.spec, work.candidate)]
    return WorkItem(work, placement, index, total)


def new_run_id() -> str:
    """Identifies one `recommender run` invocation (cloud resources are tagged with it), e.g. 20250101t120000-a1b2."""
    return f"{datetime.now(UTC):%Y%m%dt%H%M%S}-{secrets.token_hex(2)}"
