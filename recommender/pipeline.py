"""The main job: spec -> candidates -> build -> deploy -> load -> collect -> store, one candidate at a time.

A candidate that cannot run is recorded (skipped or failed, with its reason) and the job goes on; a candidate
already stored under the same measurement protocol is not measured again unless `fresh` is set.
"""

from __future__ import annotations

import secrets
import traceback
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Protocol

from recommender import paths
from recommender.decide.budget import BudgetExceeded, RunBudget
from recommender.modelrepo.export import export_model
from recommender.hardware import serving_hardware
from recommender.modelrepo.repository import default_threads_per_instance, python_backend_name, write_model_repository
from recommender.correctness.gate import Incorrect, check_outputs, judged_alike, precision_of
from recommender.errors import CandidateSkipped, RecommenderError, interruption_reason
from recommender.load.shapes import traffic_seconds
from recommender.decide.verdicts import decide_result
from recommender.metrics.steady import Rules
from recommender.payload import inference_bodies
from recommender.review import decided_from_store
from recommender.search import Work, strategy_for
from recommender.search.load_search import measure_work
from recommender.candidates import Candidate, expand_candidates
from recommender.protocol import protocol_fingerprint
from recommender.spec import ExperimentSpec
from recommender.candidates import CandidateResult
from recommender.store.results import BUDGET_SKIP, ResultStore
from recommender.targets import target_for

MODEL_NAME = "model"


class Reporter(Protocol):
    """What the job tells its user as it goes (the CLI draws progress bars from this)."""

    def candidate_started(self, candidate: Candidate, index: int, total: int, load_seconds: float) -> None: ...

    def stage(self, candidate: Candidate, text: str) -> None: ...

    def load_progress(self, candidate: Candidate, elapsed_s: float, users: int, requests: int, failures: int) -> None: ...

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
        # refuses a plan estimated above budget_usd; counts what earlier runs of the experiment spent
        self.budget = RunBudget.for_spec(self.spec, strategy.total, self.store.spent(self.spec.name),
                                         record=lambda usd: self.store.add_spend(self.spec.name, usd))
        self.run_id = new_run_id()
        experiment_id = self.store.save_experiment(self.spec)
        target = target_for(self.spec.target, self.spec.name, self.run_id)
        target.preflight()
        self.serving = serving_hardware(self.spec.target)  # measured here (NVML), or declared by a cloud instance type
        self.target, self.protocol = target, protocol_fingerprint(self.spec, accelerator=self.serving.accelerator)
        self.bodies = inference_bodies(self.spec.payload)
        try:
            self._search(strategy, experiment_id)
        except KeyboardInterrupt:
            self.store.set_experiment_status(self.spec.name, "interrupted")
            raise
        self.store.set_experiment_status(self.spec.name, "budget-exhausted" if self.budget.stopped else "done")
        return decided_from_store(self.store, self.spec.name, self.spec, self.protocol)

    def _search(self, strategy, experiment_id: int) -> None:
        """Ask the strategy for work until it has none; tell it each candidate's result, decided under the spec."""
        index, self.strategy = 0, strategy
        while (work := strategy.ask()) is not None:
            candidate_id = self.store.save_candidate(experiment_id, work.candidate)
            if work.stage == "prune":
                self.store.prune(candidate_id, self.protocol, work.reason)
                self.reporter.candidate_finished(work.candidate, "pruned", work.reason, reused=False)
            else:
                self._run_candidate(work.candidate, candidate_id, index, max(strategy.total, index + 1), work)
                index += 1
            strategy.tell(work, self._decided(work.candidate.key))

    def _decided(self, key: str) -> CandidateResult:
        result = next(r for r in self.store.results(self.spec.name, self.protocol) if r.key == key)
        return decide_result(result, self.store.window_records(result.run_id) if result.run_id else [], Rules.from_spec(self.spec))

    def _run_candidate(self, candidate: Candidate, candidate_id: int, index: int, total: int, work: Work) -> None:
        load_seconds = traffic_seconds(self.spec.traffic)
        self.reporter.candidate_started(candidate, index, total, load_seconds)
        stored = None if self.options.fresh else self.store.final_run(candidate_id, self.protocol)
        if stored is not None and _reusable(stored, work) and (stored.status == "skipped" or judged_alike(stored.correctness, self.spec, precision_of(candidate.config()))):
            self.reporter.candidate_finished(candidate, stored.status, stored.reason, reused=True)
            return
        run_dir = self.options.run_root / self.spec.name / f"{candidate.name}-{candidate.key[:8]}{_SUFFIX.get(work.stage, '')}"
        backend = python_backend_name(candidate.optimization) if self.target.deploys else None
        run_id = self.store.start_run(candidate_id, self.protocol, str(run_dir.resolve()),
                                      hardware=self.serving.to_dict(), backend=backend)
        refusal = work.reason if work.stage == "skip" else self.budget.refusal()
        if refusal is not None:  # recorded, not final: a raised budget measures it on the next run
            self._finish(candidate, run_id, "skipped", BUDGET_SKIP + refusal)
            return

        def follow(probe: dict) -> Work | None:  # adaptive search, between the probe and the teardown
            nonlocal run_id
            then = self.strategy.follow(work, probe["headline"]) if work.stage == "probe" else None
            if then is not None:  # the probe stays stored as a run of its own; the full measurement gets the next
                self.store.finish_run(run_id, "ok", reason=then.reason, **probe)
                run_id = self.store.start_run(candidate_id, self.protocol, str((run_dir / "final").resolve()),
                                              hardware=self.serving.to_dict(), backend=backend)
            return then

        try:
            outcome = self._measure(candidate, run_dir, work, follow)
        except CandidateSkipped as exc:
            self._finish(candidate, run_id, "skipped", exc.message)
        except Incorrect as exc:  # not loaded: measuring a variant that computes something else would waste the time
            self._finish(candidate, run_id, "incorrect", exc.message, correctness=exc.correctness.to_dict())
        except BudgetExceeded as exc:  # the deployment was torn down on the way out; later candidates are refused
            self._finish(candidate, run_id, "interrupted", BUDGET_SKIP + exc.message)
        except RecommenderError as exc:
            self._finish(candidate, run_id, "failed", one_line_reason(exc, run_dir))
        except KeyboardInterrupt as interrupt:  # Ctrl-C, SIGTERM or SIGHUP (errors.Interrupted)
            self._finish(candidate, run_id, "interrupted", interruption_reason(interrupt))
            raise
        except Exception as exc:  # a bug or an unforeseen failure: record it, keep the traceback, go on
            run_dir.mkdir(parents=True, exist_ok=True)
            (run_dir / "error.txt").write_text(traceback.format_exc())
            self._finish(candidate, run_id, "failed", f"unexpected error {exc!r} (traceback in {run_dir / 'error.txt'})")
        else:
            self.store.finish_run(run_id, "ok", **outcome)
            self.reporter.candidate_finished(candidate, "ok", None, reused=False)

    def _finish(self, candidate: Candidate, run_id: int, status: str, reason: str, correctness: dict | None = None) -> None:
        self.store.finish_run(run_id, status, reason=reason, correctness=correctness)
        self.reporter.candidate_finished(candidate, status, reason, reused=False)

    def _measure(self, candidate: Candidate, run_dir: Path, work: Work, follow: Callable[[dict], Work | None]) -> dict:
        """Deploy, check, load as the work asks; `follow` may ask for more on the same deployment (adaptive search)."""
        repository = self._repository(candidate, run_dir) if self.target.deploys else None
        self.reporter.stage(candidate, f"deploying on {self.target.name}")
        with self.budget.billed(), self.target.deploy(repository, MODEL_NAME, run_dir) as deployment:
            deployment.probe(self.bodies[0])
            correctness = {"correctness": self._check(candidate, deployment).to_dict()}
            fields = self._load(candidate, deployment, work, run_dir) | correctness
            then = follow(fields)
            if then is not None:
                self.reporter.stage(candidate, f"measuring in full on the same deployment ({then.repeats} repeats)")
                fields = self._load(candidate, deployment, then, run_dir / "final") | correctness | {"reason": then.reason}
        return fields

    def _load(self, candidate: Candidate, deployment, work: Work, run_dir: Path) -> dict:
        self.reporter.stage(candidate, "load")

        def progress(p) -> None:
            self.budget.check()  # BudgetExceeded stops the generator and tears the deployment down
            self.reporter.load_progress(candidate, p.elapsed_s, p.users, p.requests, p.failures)

        started = datetime.now(timezone.utc)
        with deployment.watched():  # a server or stub that dies during the load fails the candidate
            fields = measure_work(work, deployment, self.spec, self.bodies, run_dir / "load", progress).store_fields()
        cloud = deployment.cloud_metrics(started, datetime.now(timezone.utc))
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

    def _repository(self, candidate: Candidate, run_dir: Path) -> Path:
        spec = self.spec
        self.reporter.stage(candidate, f"exporting {candidate.optimization}")
        artifact = export_model(spec.model, candidate.optimization, spec.payload.sequence_length,
                                candidate.model_fingerprint, self.options.cache_dir)
        reserved = 1 if self.target.load_shares_host else 0
        threads = default_threads_per_instance(candidate.instance_group_count, reserved)
        gpu = self.serving.accelerator == "gpu"
        gpus = tuple(g.index for g in self.serving.hardware.gpus) if gpu and self.serving.hardware else ()
        return write_model_repository(candidate, artifact, run_dir / "repository", MODEL_NAME, threads_per_instance=threads,
                                      instance_kind="KIND_GPU" if gpu else "KIND_CPU", gpus=gpus)


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
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "error.txt").write_text(f"{error.message}\n\nhint: {hint}\n")
    return f"{first} (details in {run_dir / 'error.txt'})"


def new_run_id() -> str:
    """Identifies one `recommender run` invocation (cloud resources are tagged with it), e.g. 20250101t120000-a1b2."""
    return f"{datetime.now(timezone.utc):%Y%m%dt%H%M%S}-{secrets.token_hex(2)}"
