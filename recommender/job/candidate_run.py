"""One candidate, run: the reuse check, admission (max_candidates, time and money budgets), the build, the
deployment, the correctness gate and the load; its outcome stored through the run ledger.

    CandidateRun(context, item, slot, follow).run()   -> RunOutcome (already stored and reported)

A failure becomes a stored status through ERROR_STATUSES, read in order (the first class that matches decides).
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from recommender.candidates import CandidateResult, RunStatus
from recommender.correctness.gate import Incorrect, check_outputs, judged_alike, precision_of
from recommender.decide.budget import BudgetExceeded, estimate_plan
from recommender.errors import CandidateSkipped, RecommenderError, interruption_reason
from recommender.job.context import MODEL_NAME, RunContext, WorkItem
from recommender.job.refusals import refusal
from recommender.load.payload import inference_bodies, request_texts
from recommender.load.prompts import prompts_for
from recommender.load.shapes import traffic_seconds
from recommender.measurement.extra_repeat import ExtraRepeat, measure_extra
from recommender.measurement.load_search import measure_work
from recommender.metrics.levels import WindowRecord
from recommender.metrics.stage_times import StageClock
from recommender.modelrepo.llama import served_folder
from recommender.modelrepo.repository import candidate_repository, serving_backend, size_threads
from recommender.search import Work
from recommender.store.ledger import OpenRun, StoredRun, budget_reason
from recommender.targets.registry import target_for
from recommender.targets.wire import generation_body, openai_body

# adaptive search: after the probe, the full measurement on the same deployment (None: nothing more)
Follow = Callable[[Work, Any], Work | None]

_SUFFIX = {"probe": "-probe", "final": "-final"}  # adaptive search: each stage's artifacts in a folder of its own


@dataclass(frozen=True)
class RunOutcome:
    """What became of one candidate run: stored as one run (the last, for a promoted probe)."""

    status: RunStatus
    reason: str | None = None
    fields: dict[str, Any] = field(default_factory=dict)  # the measurement's figures (store_fields)
    correctness: dict[str, Any] | None = None
    budget_skipped: bool = False


def _skipped(exc: CandidateSkipped, run_dir: Path) -> RunOutcome:
    return RunOutcome(RunStatus.SKIPPED, exc.message)


def _incorrect(exc: Incorrect, run_dir: Path) -> RunOutcome:  # not loaded: a variant computing something else
    return RunOutcome(RunStatus.INCORRECT, exc.message, correctness=exc.correctness.to_dict())


def _over_budget(exc: BudgetExceeded, run_dir: Path) -> RunOutcome:  # torn down on the way out; later ones refused
    return RunOutcome(RunStatus.INTERRUPTED, budget_reason(exc.message), budget_skipped=True)


def _failed(exc: RecommenderError, run_dir: Path) -> RunOutcome:
    return RunOutcome(RunStatus.FAILED, one_line_reason(exc, run_dir))


def _interrupted(exc: KeyboardInterrupt, run_dir: Path) -> RunOutcome:  # Ctrl-C, SIGTERM, SIGHUP or the job's stop
    return RunOutcome(RunStatus.INTERRUPTED, interruption_reason(exc))


def _refused_by_system(exc: OSError, run_dir: Path) -> RunOutcome:  # a full disk, a read-only run directory
    return RunOutcome(RunStatus.FAILED, f"operating system error: {exc}")


def _unexpected(exc: Exception, run_dir: Path) -> RunOutcome:  # a bug: recorded, the traceback kept, the job goes on
    kept = keep_details(run_dir, traceback.format_exc())
    return RunOutcome(
        RunStatus.FAILED, f"unexpected error {exc!r} ({f'traceback in {kept}' if kept else 'no traceback kept'})"
    )


# (exception class, what it becomes), read in order; a KeyboardInterrupt is stored, then raised again
ERROR_STATUSES: tuple[tuple[type[BaseException], Callable[[Any, Path], RunOutcome]], ...] = (
    (CandidateSkipped, _skipped),
    (Incorrect, _incorrect),
    (BudgetExceeded, _over_budget),
    (RecommenderError, _failed),
    (KeyboardInterrupt, _interrupted),
    (OSError, _refused_by_system),
    (Exception, _unexpected),
)


def outcome_of(exc: BaseException, run_dir: Path) -> RunOutcome | None:
    """The stored outcome of a failure (None: not one the job records, such as SystemExit)."""
    return next((make(exc, run_dir) for kind, make in ERROR_STATUSES if isinstance(exc, kind)), None)


@dataclass
class CandidateRun:
    """One work item on its target, pinned to `slot`'s GPUs (if any)."""

    context: RunContext
    item: WorkItem
    candidate_id: int
    slot: Any
    follow: Follow
    opened: OpenRun | None = None  # the run being measured (a promoted probe's successor after `follow`)
    clock: StageClock = field(default_factory=StageClock)  # where its time went, stored with the run, failed or not

    def run(self) -> RunOutcome | None:
        """Measure the candidate (or reuse its stored run: None) and store and report the outcome."""
        context, candidate, placement, work = self.context, self.item.candidate, self.item.placement, self.item.work
        context.reporter.candidate_started(
            candidate, self.item.index, self.item.total, traffic_seconds(context.spec.traffic)
        )
        stored = None if context.options.fresh else context.ledger.final(self.candidate_id, placement.protocol)
        if stored is not None and self._reuses(stored):
            context.reporter.candidate_finished(candidate, stored.status, stored.reason, reused=True)
            return None
        run_dir = (
            context.options.run_root
            / context.spec.name
            / f"{candidate.name}-{candidate.key[:8]}{_SUFFIX.get(work.stage, '')}"
        )
        backend = serving_backend(candidate.optimization, placement.native_backends) if placement.deploys else None
        opened = context.ledger.start(
            self.candidate_id, placement.protocol, run_dir, placement.serving.to_dict(), backend, context.payload
        )
        refusal = work.reason if work.stage == "skip" else self._refusal()
        if refusal is not None:  # recorded, not final: a raised budget measures it on the next run
            return self._store(opened, RunOutcome(RunStatus.SKIPPED, budget_reason(refusal), budget_skipped=True))
        self.opened = opened
        try:
            fields = self._measure(run_dir, opened)
        except BaseException as exc:
            outcome = outcome_of(exc, run_dir)
            if outcome is not None and self.clock.seconds:  # the seconds a failed candidate took count too
                outcome = replace(outcome, fields={**outcome.fields, "server_stats": {"stages": self.clock.seconds}})
            if outcome is not None:
                self._store(self.opened, outcome)
            if outcome is None or isinstance(exc, KeyboardInterrupt):
                raise
            return outcome
        finally:
            context.budget.release()
        return self._store(self.opened, RunOutcome(RunStatus.OK, fields=fields))

    def _reuses(self, stored: StoredRun) -> bool:
        """A stored run answers the work unless it was not measured in full for it (its repeats did not end by their
        stopping rule under the work's repeats: adaptive search's final stage after a probe), or its correctness was
        judged under other tolerances."""
        work, spec = self.item.work, self.context.spec
        if stored.status == RunStatus.PRUNED:  # a candidate back in the race is measured in full
            # one pruned without a probe (the grid's structure) is probed when the search now asks for it
            reusable = work.stage != "final" and stored.measured
        else:
            reusable = stored.status != RunStatus.OK or stored.complete(work.repeats)
        precision = precision_of(self.item.candidate.config())
        generative = self.item.placement.spec.generative
        return reusable and (
            stored.status == RunStatus.SKIPPED or judged_alike(stored.correctness, spec, precision, generative)
        )

    def _store(self, run: OpenRun, outcome: RunOutcome) -> RunOutcome:
        self.context.ledger.finish(
            run, outcome.status, outcome.reason, outcome.fields, outcome.correctness, outcome.budget_skipped
        )
        self.context.reporter.candidate_finished(self.item.candidate, outcome.status, outcome.reason, reused=False)
        return outcome

    def _refusal(self) -> str | None:
        """Why this candidate may not start (max_candidates, the time budget, the money budget), or None; an
        admitted candidate's estimated cost is held back from the budget until it is done."""
        spec, item, deadline = self.context.spec, self.item, self.context.deadline
        cap = spec.max_candidates
        if cap is not None and item.index >= cap:
            return (
                f"max_candidates is {cap} and this is candidate {item.index + 1} of {item.total}; "
                "raise it to measure this one"
            )
        if deadline is not None and time.monotonic() >= deadline:
            return (
                f"the time budget of {spec.time_budget_seconds:g} s (time_budget_seconds) was used up before "
                "this candidate started; raise it or run again to measure it"
            )
        return self.context.budget.admit(estimate_plan(spec, 1, item.placement.spec).usd)

    def _measure(self, run_dir: Path, opened: OpenRun) -> dict:
        """Deploy, check, load as the work asks (stored as `opened`); `follow` may ask for more on the same deployment
        (adaptive search): the probe is then stored as a run of its own and the full measurement gets the next (the
        ledger's promote)."""
        context, candidate, placement = self.context, self.item.candidate, self.item.placement
        gpus = len(placement.gpus_for(self.slot)) if placement.serving.accelerator == "gpu" else None
        refused = refusal(context.spec, candidate, placement.native_backends, gpus, placement.engine_refusals)
        if refused is not None:  # nothing exported, no server started
            raise CandidateSkipped(refused)
        clock = self.clock
        with contextlib.ExitStack() as stack:
            deployment, bodies = self._deployed(stack, run_dir)
            with clock.timed("correctness"):
                correctness = {"correctness": self._check(deployment).to_dict()}
            work = self.item.work
            with clock.timed("load"):
                fields = self._load(deployment, work, run_dir, bodies) | correctness
            if work.stage == "final" and work.reason:  # why it is measured in full (adaptive search)
                fields["reason"] = work.reason
            then = self.follow(work, fields["headline"]) if work.stage == "probe" else None
            if then is not None:
                self.opened = context.ledger.promote(opened, fields, then.reason, run_dir / "final")
                context.reporter.stage(candidate, f"measuring in full on the same deployment ({then.repeats} repeats)")
                with clock.timed("load"):
                    fields = (
                        self._load(deployment, then, run_dir / "final", bodies) | correctness | {"reason": then.reason}
                    )
        return fields | {"server_stats": {**(fields.get("server_stats") or {}), "stages": clock.seconds}}

    def _deployed(self, stack: contextlib.ExitStack, run_dir: Path) -> tuple[Any, list[dict]]:
        """Export (cached), deploy and probe, timed; the deployment is torn down (and billed until then) when `stack`
        closes. Returns the deployment and the request bodies in its format."""
        context, candidate, placement = self.context, self.item.candidate, self.item.placement
        # one target per candidate: concurrent ones share no client
        target = target_for(placement.spec, context.spec.name, context.run_id)
        target.cancel_on(context.stop.event)  # a SageMaker endpoint still starting stops waiting when the job stops
        clock = self.clock
        with context.export_lock, clock.timed("export"):  # the cache and the exporters are not safe across threads
            # a Triton repository; or the model folder of a server that loads one itself (vLLM), or none (Infinity)
            repository = self._repository(run_dir) if placement.deploys else served_folder(context.spec.model)
        context.stop.check()
        context.reporter.stage(candidate, f"deploying on {placement.target_name} ({placement.spec.instance_type})")
        estimate = estimate_plan(context.spec, 1, placement.spec)
        stack.enter_context(context.budget.billed(estimate.price_per_hour, estimate.endpoint_instance_count))
        stack.callback(clock.stop, "teardown")  # exits run last-in first-out: the teardown is timed around the
        with clock.timed("deploy"):  # deployment's own exit
            deployment = stack.enter_context(
                target.deploy(repository, MODEL_NAME, run_dir, placement.gpus_for(self.slot), candidate.config())
            )
        stack.callback(clock.start, "teardown")
        bodies = self._bodies(deployment)
        with clock.timed("probe"):
            deployment.probe(bodies[0])
        return deployment, bodies

    def measure_more(self, stored: CandidateResult, records: list[WindowRecord], run_dir: Path) -> ExtraRepeat:
        """One further repeat of the stored run at its level, on a deployment of its own (the tied leaders measured
        more: job/tiebreak.py); nothing is stored here. The correctness gate is not run again: this configuration
        passed it when the run was measured, from the same cached export."""
        assert stored.headline is not None  # only a ranked candidate is measured more
        self.context.reporter.stage(self.item.candidate, "measuring once more to break a tie")
        try:
            with contextlib.ExitStack() as stack:
                deployment, bodies = self._deployed(stack, run_dir)
                with self.clock.timed("load"), deployment.watched():
                    server_stats = stored.server_stats or {}
                    return measure_extra(
                        deployment,
                        self.context.spec,
                        bodies,
                        run_dir / "load",
                        stored.headline,
                        records,
                        server_stats,
                        self._progress,
                    )
        finally:
            self.context.budget.release()

    def _bodies(self, deployment) -> list[dict]:
        """The request bodies in the deployment's format: KServe bodies of token ids padded as the candidate asks, or
        one text per request for a server that tokenizes (the OpenAI embeddings API): the same requests decoded from
        the same token ids, which it tokenizes to their own lengths. A generative server (chat, completions) gets
        one generation per prompt (load/prompts.py: synthetic, the payload file's rows or a mooncake trace's), each
        asking its own output length; the spec's paths are absolute once loaded."""
        payload, wire = self.context.spec.payload, deployment.wire
        if wire.generative:
            return [
                generation_body(wire, deployment.model_name, prompt.content, prompt.output_tokens, wire.stream)
                for prompt in prompts_for(self.context.spec, Path("."))
            ]
        if not wire.takes_text:
            return inference_bodies(payload, self.item.candidate.padding)
        return [openai_body(deployment.model_name, [text]) for text in request_texts(payload)]

    def _load(self, deployment, work: Work, run_dir: Path, bodies: list[dict]) -> dict:
        context, candidate = self.context, self.item.candidate
        context.reporter.stage(candidate, "load")
        started = datetime.now(UTC)
        with deployment.watched():  # a server or stub that dies during the load fails the candidate
            measured = measure_work(work, deployment, context.spec, bodies, run_dir / "load", self._progress)
            fields = measured.store_fields()
        cloud = deployment.cloud_metrics(started, datetime.now(UTC))
        if cloud:
            fields["server_stats"] = {**(fields.get("server_stats") or {}), "cloudwatch": cloud}
        return fields

    def _progress(self, p) -> None:
        context = self.context
        context.stop.check()  # an interrupted job: the generator stops and the deployment is torn down
        context.budget.check()  # BudgetExceeded stops the generator and tears the deployment down
        context.reporter.load_progress(self.item.candidate, p.elapsed_s, p.users, p.requests, p.failures)

    def _check(self, deployment):
        """The correctness gate; raises Incorrect (before any load) when the outputs are outside tolerance."""
        candidate, spec = self.item.candidate, self.context.spec
        self.context.reporter.stage(candidate, "checking outputs against the reference")
        precision = precision_of(candidate.config())
        correctness = check_outputs(deployment, spec, candidate.max_batch_size, precision, candidate.padding)
        if not correctness.passed:
            raise Incorrect(correctness)
        return correctness

    def _repository(self, run_dir: Path) -> Path:
        context, candidate, placement = self.context, self.item.candidate, self.item.placement
        context.reporter.stage(candidate, f"exporting {candidate.optimization}")
        reserved = 1 if placement.load_shares_host else 0  # the load generator's core, on a shared host
        gpu = placement.serving.accelerator == "gpu"
        return candidate_repository(
            context.spec,
            candidate,
            run_dir / "repository",
            cache_dir=context.options.cache_dir,
            model_name=MODEL_NAME,
            threads_per_instance=size_threads(candidate.instance_group_count, reserved_cores=reserved),
            native=placement.native_backends,
            instance_kind="KIND_GPU" if gpu else "KIND_CPU",
            # the server is given exactly the candidate's GPUs (deploy), as CUDA devices 0..n-1
            gpus=tuple(range(len(placement.gpus_for(self.slot)))),
            serving=placement.serving_for(self.slot),  # a TensorRT engine is built on the candidate's GPU
        )


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
