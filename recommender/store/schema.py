"""The results schema (SQLAlchemy 2.0 ORM). Changes here need an Alembic migration in store/migrations/versions."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import JSON, Boolean, DateTime, Float, ForeignKey, Integer, String, Text, UniqueConstraint, false
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """A stored time as an aware UTC datetime (SQLite hands them back naive)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Base(DeclarativeBase):
    pass


class RunPart:
    """Columns of every table that holds part of a run (its phases, seconds, windows)."""

    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)


class Percentiles:
    """The latency percentiles of a stretch of requests, in ms (None: too few samples for that percentile)."""

    p50_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p90_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p95_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p99_ms: Mapped[float | None] = mapped_column(Float, nullable=True)


class Experiment(Base):
    __tablename__ = "experiments"

    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(120), unique=True)
    spec: Mapped[dict] = mapped_column(JSON)
    status: Mapped[str] = mapped_column(
        String(20), default="created"
    )  # created | running | done | interrupted | budget-exhausted
    spent_usd: Mapped[float] = mapped_column(
        Float, default=0.0, server_default="0"
    )  # migration 0003: every run's cloud spend
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    candidates: Mapped[list[CandidateRow]] = relationship(back_populates="experiment", cascade="all, delete-orphan")


class CandidateRow(Base):
    __tablename__ = "candidates"
    __table_args__ = (UniqueConstraint("experiment_id", "key"),)

    id: Mapped[int] = mapped_column(primary_key=True)
    experiment_id: Mapped[int] = mapped_column(ForeignKey("experiments.id", ondelete="CASCADE"), index=True)
    key: Mapped[str] = mapped_column(String(32))
    name: Mapped[str] = mapped_column(String(120))
    config: Mapped[dict] = mapped_column(JSON)
    experiment: Mapped[Experiment] = relationship(back_populates="candidates")
    runs: Mapped[list[Run]] = relationship(back_populates="candidate", cascade="all, delete-orphan")


class Run(Base):
    """One measurement of one candidate. status: running | ok | failed | skipped | interrupted | incorrect | pruned."""

    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(primary_key=True)
    candidate_id: Mapped[int] = mapped_column(ForeignKey("candidates.id", ondelete="CASCADE"), index=True)
    protocol_key: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(20))
    reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    duration_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    artifacts_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    headline: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # invocations_per_minute, latency_ms, ...
    server_stats: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    hardware: Mapped[dict | None] = mapped_column(
        JSON, nullable=True
    )  # migration 0005: accelerator, CPU, GPUs (measured)
    backend: Mapped[str | None] = mapped_column(String(60), nullable=True)  # migration 0005: what served it
    correctness: Mapped[dict | None] = mapped_column(
        JSON, nullable=True
    )  # migration 0006: the gate's figures, tolerances, reference
    # migration 0007: the budget (money, time, max_candidates) refused or stopped it; a raised budget measures it again
    budget_skipped: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    # migration 0008: the payload it was sent (metrics/payload_lengths.py: fingerprint, source, token-length histogram)
    payload: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    candidate: Mapped[CandidateRow] = relationship(back_populates="runs")
    phases: Mapped[list[PhaseRow]] = relationship(cascade="all, delete-orphan", order_by="PhaseRow.phase_index")
    series: Mapped[list[SecondRow]] = relationship(cascade="all, delete-orphan", order_by="SecondRow.second")
    windows: Mapped[list[WindowRow]] = relationship(
        cascade="all, delete-orphan", order_by="(WindowRow.repeat, WindowRow.start_s)"
    )


class PhaseRow(RunPart, Percentiles, Base):
    __tablename__ = "phase_summaries"

    phase_index: Mapped[int] = mapped_column(Integer)
    window_start_s: Mapped[float] = mapped_column(Float)
    window_end_s: Mapped[float] = mapped_column(Float)
    users_min: Mapped[int] = mapped_column(Integer)
    users_max: Mapped[int] = mapped_column(Integer)
    requests: Mapped[int] = mapped_column(Integer)
    errors: Mapped[int] = mapped_column(Integer)
    invocations_per_minute: Mapped[float] = mapped_column(Float)
    stable: Mapped[bool | None] = mapped_column(Boolean, nullable=True)  # migration 0002; None for older runs
    flags: Mapped[list | None] = mapped_column(JSON, nullable=True)  # generator-bound, late sends, ...


class SecondRow(RunPart, Base):
    __tablename__ = "series"

    second: Mapped[int] = mapped_column(Integer)
    users: Mapped[int] = mapped_column(Integer)
    ok: Mapped[int] = mapped_column(Integer)
    errors: Mapped[int] = mapped_column(Integer)
    p50_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p95_ms: Mapped[float | None] = mapped_column(Float, nullable=True)
    p99_ms: Mapped[float | None] = mapped_column(Float, nullable=True)


class WindowRow(RunPart, Percentiles, Base):
    """One steady-state window of one repeat of a run (migration 0002): client figures and server-side deltas."""

    __tablename__ = "windows"

    repeat: Mapped[int] = mapped_column(Integer)
    phase_index: Mapped[int] = mapped_column(Integer)
    window_index: Mapped[int] = mapped_column(Integer)
    start_s: Mapped[float] = mapped_column(Float)
    end_s: Mapped[float] = mapped_column(Float)
    load: Mapped[float] = mapped_column(Float)  # users (closed loop) or requests per second (open loop)
    requests: Mapped[int] = mapped_column(Integer)
    errors: Mapped[int] = mapped_column(Integer)
    samples: Mapped[int] = mapped_column(Integer)  # successful requests: the latency percentiles' sample count
    invocations_per_minute: Mapped[float] = mapped_column(Float)
    stable: Mapped[bool] = mapped_column(Boolean)
    late_share: Mapped[float | None] = mapped_column(Float, nullable=True)
    generator_cpu_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    server_cpu_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    server_rss_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_utilization_percent: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_memory_mb: Mapped[float | None] = mapped_column(Float, nullable=True)
    gpu_power_w: Mapped[float | None] = mapped_column(Float, nullable=True)  # migration 0005
    queue_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    compute_input_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    compute_infer_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    compute_output_us: Mapped[float | None] = mapped_column(Float, nullable=True)
    executions: Mapped[int | None] = mapped_column(Integer, nullable=True)
    inferences: Mapped[int | None] = mapped_column(Integer, nullable=True)
    avg_batch_size: Mapped[float | None] = mapped_column(Float, nullable=True)
    # migration 0009: a generative window's figures (metrics/generation.py WindowGeneration; None: not generative)
    generation: Mapped[dict | None] = mapped_column(JSON, nullable=True)


class LeaseRow(Base):
    """The job measuring an experiment now (migration 0004): one row per experiment while a job holds it.

    Keyed by the experiment's name, not its id: a job takes the lease before it writes the experiment row, so a
    refused job changes nothing. `holder` is host:pid:process start time (a reused pid is not the holder)."""

    __tablename__ = "experiment_leases"

    experiment: Mapped[str] = mapped_column(String(120), primary_key=True)
    holder: Mapped[str] = mapped_column(String(255))
    host: Mapped[str] = mapped_column(String(255))
    pid: Mapped[int] = mapped_column(Integer)
    process_started: Mapped[float] = mapped_column(Float)  # the holder process's start time, seconds since the epoch
    acquired_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    heartbeat_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))  # heartbeat_at + the holder's ttl
