"""The store API: the only way the pipeline, reports and the dashboard read and write results."""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session, selectinload

from recommender.candidates import Candidate, CandidateResult, RunStatus
from recommender.errors import StoreError
from recommender.metrics.generation import WindowGeneration
from recommender.metrics.headline import Headline
from recommender.metrics.levels import WindowRecord
from recommender.metrics.server_figures import SERVER_FIGURES
from recommender.metrics.steady import Window
from recommender.metrics.summary import PhaseSummary, WindowStats
from recommender.redaction import redact_document
from recommender.spec import ExperimentSpec
from recommender.store.database import explain, open_engine
from recommender.store.lease import Lease, live_holder
from recommender.store.schema import CandidateRow, Experiment, PhaseRow, Run, SecondRow, WindowRow, as_utc, utcnow
from recommender.vocabulary import PERCENTILE_NAMES

# a run in one of these states is not measured again unless --fresh, except one the budget refused (`budget_skipped`)
FINAL = (RunStatus.OK, RunStatus.SKIPPED, RunStatus.INCORRECT, RunStatus.PRUNED)
BUDGET_SKIP = "budget: "  # a budget refusal's reason starts so (older code read the prefix; the flag is what counts)
SECOND_PERCENTILES = ("p50", "p95", "p99")  # the per-second table has no p90 column (schema 0001)


class ExperimentStatus(StrEnum):
    """An experiment's job state, as stored in `experiments.status`."""

    RUNNING = "running"  # a job is measuring it (or died: the lease says which)
    DONE = "done"  # every planned candidate has a final run
    INTERRUPTED = "interrupted"  # Ctrl-C, SIGTERM or a crash stopped the job; running it again resumes
    BUDGET_EXHAUSTED = "budget-exhausted"  # the money budget stopped it; a raised budget measures the rest


@dataclass(frozen=True)
class ExperimentInfo:
    name: str
    status: ExperimentStatus
    spec: dict[str, Any]
    created_at: datetime
    updated_at: datetime


class ResultStore:
    """Experiments, candidates, runs, phase summaries and per-second series in one SQL database."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str | None = None, existing: bool = False) -> ResultStore:
        """The store at `url` (resolve_url's default without); `existing`: for a command that only reads results, a
        SQLite file that is not there is an InputError (exit 2), not made empty."""
        return cls(open_engine(url, existing=existing))

    def lease(self, experiment: str, wait: bool = False) -> Lease:
        """The experiment's lease for this process (a context manager): one job measures an experiment at a time."""
        return Lease(self.engine, experiment, wait=wait)

    def lease_holder(self, experiment: str) -> str | None:
        """Who is measuring the experiment now, described; None when nobody is."""
        return live_holder(self.engine, experiment)

    def _session(self) -> Session:
        return Session(self.engine, expire_on_commit=False)

    def _write(self, work) -> Any:
        try:
            with self._session() as session, session.begin():
                return work(session)
        except SQLAlchemyError as exc:
            reason, hint = explain(exc)
            raise StoreError(f"results database write failed: {reason}", hint=hint) from exc

    # --- writing -------------------------------------------------------------------------------------------

    def save_experiment(self, spec: ExperimentSpec, status: ExperimentStatus = ExperimentStatus.RUNNING) -> int:
        """Create or update the experiment row (runs a gone job left 'running' are interrupted by taking the lease)."""

        return self._write(lambda session: _experiment_row(session, spec, status).id)

    def set_experiment_status(self, name: str, status: ExperimentStatus) -> None:
        def work(session: Session) -> None:
            row = session.scalar(select(Experiment).where(Experiment.name == name))
            if row is not None:
                row.status, row.updated_at = status, utcnow()

        self._write(work)

    def save_candidate(self, experiment_id: int, candidate: Candidate) -> int:
        return self._write(lambda session: _candidate_row(session, experiment_id, candidate).id)

    def final_run(self, candidate_id: int, protocol_key: str) -> Run | None:
        """The candidate's newest run under this protocol when it is ok, skipped or incorrect (so it need not be
        measured again); None when the newest failed or was interrupted, even with an older ok run: the resume of
        an interrupted `--fresh` run measures it again, so the stored (newest) status is never a stale failure."""
        with self._session() as session:
            query = (
                select(Run)
                .where(Run.candidate_id == candidate_id, Run.protocol_key == protocol_key)
                .order_by(Run.id.desc())
                .limit(1)
            )
            newest = session.scalar(query)
            final = newest is not None and newest.status in FINAL and not newest.budget_skipped
            return newest if final else None

    def add_spend(self, experiment: str, usd: float) -> None:
        """Add cloud spend to the experiment's total (one UPDATE: concurrent writers never lose an amount)."""
        if usd < 0:
            raise ValueError("spend must be >= 0")

        def work(session: Session) -> None:
            session.execute(
                update(Experiment)
                .where(Experiment.name == experiment)
                .values(spent_usd=Experiment.spent_usd + usd, updated_at=utcnow())
            )

        self._write(work)

    def spent(self, experiment: str) -> float:
        """The experiment's cloud spend over every run so far, in USD (0 for an experiment not stored yet)."""
        with self._session() as session:
            return session.scalar(select(Experiment.spent_usd).where(Experiment.name == experiment)) or 0.0

    def start_run(
        self,
        candidate_id: int,
        protocol_key: str,
        artifacts_dir: str | None,
        hardware: dict | None = None,
        backend: str | None = None,
        payload: dict | None = None,
    ) -> int:
        """Open a run; `hardware` is what it serves on (hardware.ServingHardware.to_dict), `backend` what serves it,
        `payload` what it is sent (metrics/payload_lengths.PayloadLengths.to_dict)."""

        def work(session: Session) -> int:
            run = Run(
                candidate_id=candidate_id,
                protocol_key=protocol_key,
                status=RunStatus.RUNNING,
                artifacts_dir=artifacts_dir,
                hardware=hardware,
                backend=backend,
                payload=payload,
            )
            session.add(run)
            session.flush()
            return run.id

        return self._write(work)

    def finish_run(
        self,
        run_id: int,
        status: str,
        reason: str | None = None,
        headline: Headline | None = None,
        server_stats: dict | None = None,
        phases: Sequence[PhaseSummary] = (),
        series: Sequence[WindowStats] = (),
        windows: Sequence[tuple[int, Window]] = (),
        correctness: dict | None = None,
        budget_skipped: bool = False,
    ) -> None:
        """Close a run; `windows` are (repeat, window) pairs of every repeat's steady-state windows; `budget_skipped`:
        the budget refused or stopped it (not final: a raised budget measures it)."""

        def work(session: Session) -> None:
            run = session.get(Run, run_id, with_for_update=True)  # a job taking the lease over may interrupt it now
            if run is None:
                raise StoreError(f"run {run_id} is not in the store", hint="It was deleted while it ran; run again.")
            if run.status == RunStatus.INTERRUPTED and status != RunStatus.INTERRUPTED:
                raise StoreError(
                    f"run {run_id} was interrupted by another job ({run.reason}); not storing it as {status}",
                    hint="Another job took this experiment's lease over; it measures this candidate again.",
                )
            run.status, run.reason, run.server_stats, run.correctness = status, reason, server_stats, correctness
            run.budget_skipped = budget_skipped
            _close_run(session, run, headline, phases, series, windows)

        self._write(work)

    def add_repeat(
        self, run_id: int, windows: Sequence[tuple[int, Window]], headline: Headline, server_stats: dict
    ) -> None:
        """A further repeat of a finished run (the tied leaders measured more, job/tiebreak.py): its windows added,
        the headline and server figures decided again over every repeat put in place."""

        def work(session: Session) -> None:
            run = session.get(Run, run_id, with_for_update=True)
            if run is None:
                raise StoreError(f"run {run_id} is not in the store", hint="It was deleted meanwhile; run again.")
            run.headline, run.server_stats = headline.to_dict(), server_stats
            session.add_all(_window_row(run.id, repeat, w) for repeat, w in windows)

        self._write(work)

    def set_server_stats(self, run_id: int, server_stats: dict) -> None:
        """Replace a finished run's server figures (what measuring the tied leaders more bought is kept there)."""

        def work(session: Session) -> None:
            run = session.get(Run, run_id, with_for_update=True)
            if run is None:
                raise StoreError(f"run {run_id} is not in the store", hint="It was deleted meanwhile; run again.")
            run.server_stats = server_stats

        self._write(work)

    def save_imported_run(
        self,
        spec: ExperimentSpec,
        candidate: Candidate,
        protocol_key: str,
        artifacts_dir: str,
        backend: str,
        headline: Headline | None = None,
        server_stats: dict | None = None,
        phases: Sequence[PhaseSummary] = (),
        series: Sequence[WindowStats] = (),
        windows: Sequence[tuple[int, Window]] = (),
    ) -> int | None:
        """Another tool's measurement in one transaction (all or nothing): the experiment (done), its candidate and
        one ok run with its figures; None, and nothing written, when that run is stored already (same protocol)."""

        def work(session: Session) -> int:
            experiment = _experiment_row(session, spec, ExperimentStatus.DONE)
            candidate_id = _candidate_row(session, experiment.id, candidate).id
            newest = session.scalar(
                select(Run)
                .where(Run.candidate_id == candidate_id, Run.protocol_key == protocol_key)
                .order_by(Run.id.desc())
                .limit(1)
            )
            if newest is not None and newest.status in FINAL:
                raise _StoredAlready  # rolls the experiment's and candidate's updates back
            run = Run(
                candidate_id=candidate_id,
                protocol_key=protocol_key,
                status=RunStatus.OK,
                artifacts_dir=artifacts_dir,
                backend=backend,
                server_stats=server_stats,
            )
            session.add(run)
            session.flush()
            _close_run(session, run, headline, phases, series, windows)
            return run.id

        try:
            return self._write(work)
        except _StoredAlready:
            return None

    def prune(self, candidate_id: int, protocol_key: str, reason: str) -> None:
        """Adaptive search took the candidate out of the race: its latest run under the protocol becomes `pruned`
        with the reason; its figures and windows (the partial measurement) stay as they were stored. A candidate
        pruned before any measurement (the grid's structure) gets a run of its own with no figures."""

        def work(session: Session) -> None:
            run = session.scalar(
                select(Run)
                .where(Run.candidate_id == candidate_id, Run.protocol_key == protocol_key)
                .order_by(Run.id.desc())
                .limit(1)
                .with_for_update()
            )
            if run is None:
                run = Run(candidate_id=candidate_id, protocol_key=protocol_key, finished_at=utcnow())
                session.add(run)
            run.status, run.reason = RunStatus.PRUNED, reason

        self._write(work)

    # --- reading -------------------------------------------------------------------------------------------

    def experiments(self) -> list[ExperimentInfo]:
        with self._session() as session:
            rows = session.scalars(select(Experiment).order_by(Experiment.created_at.desc()))
            return [
                ExperimentInfo(r.name, ExperimentStatus(r.status), r.spec, r.created_at, r.updated_at) for r in rows
            ]

    def experiment(self, name: str) -> ExperimentInfo:
        for info in self.experiments():
            if info.name == name:
                return info
        known = ", ".join(e.name for e in self.experiments()) or "none yet"
        raise StoreError(
            f"no experiment named {name!r} in the results database",
            hint=f"Known experiments: {known}. Run `recommender run FILE` first, or pass --db.",
        )

    def current_protocol(self, experiment: str) -> str | None:
        """The measurement protocol of the experiment's newest run (what rank, report and the dashboard read)."""
        with self._session() as session:
            query = (
                select(Run.protocol_key)
                .join(CandidateRow)
                .join(Experiment)
                .where(Experiment.name == experiment)
                .order_by(Run.id.desc())
                .limit(1)
            )
            return session.scalar(query)

    def current_protocols(self, experiment: str) -> set[str]:
        """The protocol of each target's newest run (a multi-target experiment has one per target; candidates carry
        their target in their configuration): what rank, report and the dashboard read."""
        newest: dict[str, str] = {}
        with self._session() as session:
            query = (
                select(CandidateRow.config, Run.protocol_key)
                .join(Run, Run.candidate_id == CandidateRow.id)
                .join(Experiment)
                .where(Experiment.name == experiment)
                .order_by(Run.id.desc())
            )
            for config, key in session.execute(query):
                newest.setdefault(config.get("target", ""), key)
        return set(newest.values())

    def results(self, experiment: str, protocol_key: str | Collection[str] | None = None) -> list[CandidateResult]:
        """Every candidate of the experiment with its latest run (under `protocol_key` when given).

        Without `protocol_key` runs of different protocols are mixed: decisions read `current_protocol` instead."""
        with self._session() as session:
            query = (
                select(CandidateRow)
                .join(Experiment)
                .where(Experiment.name == experiment)
                .options(selectinload(CandidateRow.runs))
                .order_by(CandidateRow.id)
            )
            return [_result(row, protocol_key) for row in session.scalars(query)]

    def phases(self, run_id: int) -> list[PhaseRow]:
        with self._session() as session:
            return list(
                session.scalars(select(PhaseRow).where(PhaseRow.run_id == run_id).order_by(PhaseRow.phase_index))
            )

    def series(self, run_id: int) -> list[SecondRow]:
        with self._session() as session:
            return list(session.scalars(select(SecondRow).where(SecondRow.run_id == run_id).order_by(SecondRow.second)))

    def windows(self, run_id: int, repeat: int | None = None) -> list[WindowRow]:
        """A run's steady-state windows (every repeat, or one), in time order."""
        with self._session() as session:
            query = select(WindowRow).where(WindowRow.run_id == run_id)
            if repeat is not None:
                query = query.where(WindowRow.repeat == repeat)
            return list(session.scalars(query.order_by(WindowRow.repeat, WindowRow.start_s)))

    def window_records(self, run_id: int) -> list[WindowRecord]:
        """A run's windows as the decision reads them (plain records, every repeat, in time order)."""
        return [_window_record(row) for row in self.windows(run_id)]

    def history(self, experiment: str) -> list[CandidateResult]:
        """Every finished run of the experiment, oldest first, one result each, with its protocol key."""
        with self._session() as session:
            query = (
                select(Run, CandidateRow)
                .join_from(Run, CandidateRow)
                .join(Experiment)
                .where(Experiment.name == experiment, Run.finished_at.is_not(None))
                .order_by(Run.id)
            )
            return [_run_result(row, run) for run, row in session.execute(query)]

    def runs(self, experiment: str) -> Iterator[Run]:
        with self._session() as session:
            query = (
                select(Run).join(CandidateRow).join(Experiment).where(Experiment.name == experiment).order_by(Run.id)
            )
            yield from session.scalars(query)


class _StoredAlready(Exception):
    """save_imported_run: the run is stored already; nothing is written."""


def _experiment_row(session: Session, spec: ExperimentSpec, status: ExperimentStatus) -> Experiment:
    """The experiment's row, created or updated to `spec` and `status`."""
    row = session.scalar(select(Experiment).where(Experiment.name == spec.name))
    document = redact_document(spec.model_dump(mode="json"))  # a URL's password is not kept
    if row is None:
        row = Experiment(name=spec.name, spec=document)
        session.add(row)
    row.spec, row.status, row.updated_at = document, status, utcnow()
    session.flush()
    return row


def _candidate_row(session: Session, experiment_id: int, candidate: Candidate) -> CandidateRow:
    """The candidate's row in the experiment, created when new."""
    query = select(CandidateRow).where(CandidateRow.experiment_id == experiment_id, CandidateRow.key == candidate.key)
    row = session.scalar(query)
    if row is None:
        row = CandidateRow(
            experiment_id=experiment_id, key=candidate.key, name=candidate.name, config=candidate.config()
        )
        session.add(row)
        session.flush()
    return row


def _close_run(
    session: Session,
    run: Run,
    headline: Headline | None,
    phases: Sequence[PhaseSummary],
    series: Sequence[WindowStats],
    windows: Sequence[tuple[int, Window]],
) -> None:
    """A run's end and figures: its headline, phase summaries, per-second series and steady-state windows."""
    run.headline = headline.to_dict() if headline else None
    run.finished_at = utcnow()
    run.duration_s = (run.finished_at - as_utc(run.started_at or run.finished_at)).total_seconds()
    session.add_all(_phase_row(run.id, p) for p in phases)
    session.add_all(_second_row(run.id, second, s) for second, s in enumerate(series))
    session.add_all(_window_row(run.id, repeat, w) for repeat, w in windows)


def _result(row: CandidateRow, protocol_key: str | Collection[str] | None) -> CandidateResult:
    keys = {protocol_key} if isinstance(protocol_key, str) else protocol_key
    runs = [r for r in row.runs if keys is None or r.protocol_key in keys]
    protocol_key = next(iter(keys)) if keys and len(keys) == 1 else None
    run = max(runs, key=lambda r: r.id) if runs else None
    if run is None:
        return CandidateResult(
            row.key, row.name, row.config, RunStatus.PENDING, None, None, None, None, None, None, protocol_key
        )
    return _run_result(row, run)


def _run_result(row: CandidateRow, run: Run) -> CandidateResult:
    return CandidateResult(
        row.key,
        row.name,
        row.config,
        RunStatus(run.status),
        run.reason,
        Headline.from_dict(run.headline),
        run.server_stats,
        run.id,
        run.duration_s,
        run.finished_at,
        run.protocol_key,
        run.hardware,
        run.backend,
        run.correctness,
        run.budget_skipped,
        run.payload,
    )


def _window_record(row: WindowRow) -> WindowRecord:
    return WindowRecord(
        row.repeat,
        row.phase_index,
        row.window_index,
        row.load,
        row.requests,
        row.errors,
        row.samples,
        row.invocations_per_minute,
        {name: getattr(row, f"{name}_ms") for name in PERCENTILE_NAMES},
        {name: getattr(row, name) for name in SERVER_FIGURES},
        WindowGeneration.from_dict(row.generation),
    )


def _phase_row(run_id: int, phase: PhaseSummary) -> PhaseRow:
    s = phase.stats
    return PhaseRow(
        run_id=run_id,
        phase_index=phase.index,
        window_start_s=s.start_s,
        window_end_s=s.end_s,
        users_min=s.users_min,
        users_max=s.users_max,
        requests=s.requests,
        errors=s.errors,
        invocations_per_minute=s.invocations_per_minute,
        stable=phase.stable,
        flags=list(phase.flags),
        **_latency_columns(s, PERCENTILE_NAMES),
    )


def _second_row(run_id: int, second: int, s: WindowStats) -> SecondRow:
    return SecondRow(
        run_id=run_id,
        second=second,
        users=s.users_max,
        ok=s.ok,
        errors=s.errors,
        **_latency_columns(s, SECOND_PERCENTILES),
    )


def _window_row(run_id: int, repeat: int, w: Window) -> WindowRow:
    s = w.stats
    return WindowRow(
        run_id=run_id,
        repeat=repeat,
        phase_index=w.phase_index,
        window_index=w.index,
        start_s=s.start_s,
        end_s=s.end_s,
        load=w.load,
        requests=s.requests,
        errors=s.errors,
        samples=s.ok,
        invocations_per_minute=s.invocations_per_minute,
        stable=w.stable,
        late_share=w.late_share,
        generator_cpu_percent=w.generator_cpu,
        generation=w.generation.to_dict() if w.generation else None,
        **{name: w.server.get(name) for name in SERVER_FIGURES},
        **_latency_columns(s, PERCENTILE_NAMES),
    )


def _latency_columns(stats: WindowStats, names: tuple[str, ...]) -> dict[str, float | None]:
    return {f"{name}_ms": stats.latency_ms.get(name) for name in names}
