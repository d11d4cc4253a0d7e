"""The lease per experiment: one job measures an experiment at a time.

`Job.run` holds it around everything it writes and measures. Taking it: free -> take it; held by a live job ->
refuse (ExperimentLeased, exit 2) or, with `wait`, poll until it is free; held by a job that is gone (on this host
and its process is dead, or its heartbeat is older than its ttl) -> take it over. Only a job that has taken the lease
marks the experiment's runs left `running` as interrupted. A heartbeat thread renews it every ttl/4 seconds; it is
released on every exit path. A holder killed with SIGKILL is taken over at once from its own host and after its ttl
from any other one. Times are each host's clock: hosts sharing a database should keep theirs synchronised (NTP).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import timedelta

import psutil
from sqlalchemy import Engine, Row, delete, insert, select, update
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from recommender.candidates import RunStatus
from recommender.errors import ExperimentLeased, StoreError
from recommender.store.database import explain
from recommender.store.schema import CandidateRow, Experiment, LeaseRow, Run, as_utc, utcnow

LEASE_TTL_S = 60.0  # a lease whose heartbeat is older than this is free
WAIT_POLL_S = 5.0  # how often a waiting job looks again
_RACES = 5  # attempts when other jobs change the lease between our read and our write
_TABLE = LeaseRow.metadata.tables[LeaseRow.__tablename__]  # LeaseRow.__table__, typed as a Table
_RUNS = Run.metadata.tables[Run.__tablename__]  # Run.__table__, typed as a Table


@dataclass(frozen=True)
class Holder:
    """A process that may hold leases: host, pid and the process's start time (so a reused pid is not the holder)."""

    host: str
    pid: int
    started: float

    @classmethod
    def this_process(cls) -> Holder:
        return cls(socket.gethostname(), os.getpid(), psutil.Process().create_time())

    @property
    def id(self) -> str:
        return f"{self.host}:{self.pid}:{self.started:.0f}"

    def is_gone(self) -> bool:
        """Known to be gone: on this host, and its pid is not running or belongs to a process started at another
        time."""
        if self.host != socket.gethostname():
            return False  # another host's process cannot be looked at: its heartbeat tells
        try:
            process = psutil.Process(self.pid)
            return process.status() == psutil.STATUS_ZOMBIE or abs(process.create_time() - self.started) > 1.0
        except psutil.NoSuchProcess:
            return True
        except psutil.AccessDenied:
            return False  # alive, run by another user: its heartbeat tells


class Lease:
    """The right of one process to measure one experiment; a context manager that takes, renews and releases it."""

    def __init__(
        self,
        engine: Engine,
        experiment: str,
        holder: Holder | None = None,
        ttl_s: float = LEASE_TTL_S,
        wait: bool = False,
        poll_s: float = WAIT_POLL_S,
    ) -> None:
        self.engine, self.experiment = engine, experiment
        self.holder = holder or Holder.this_process()
        self.ttl_s, self.wait, self.poll_s = ttl_s, wait, poll_s
        self.lost = False  # set by the heartbeat when another job took the lease over (this one stalled past its ttl)
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> Lease:
        self.acquire()
        self._beat = threading.Thread(target=self._heartbeat, name=f"lease {self.experiment}", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, exc_type, *_exc) -> None:
        self._stop.set()
        if self._beat is not None:  # started by __enter__
            self._beat.join(timeout=10)  # a renewal stuck on an unreachable database must not hold the job's exit
        try:
            self.release()
        except StoreError:
            if exc_type is None:
                raise  # else the failure in flight is the one to report; an unreleased lease expires after ttl_s

    def acquire(self) -> None:
        """Take the lease; a live holder makes this wait (`wait`) or raise ExperimentLeased."""
        while (blocking := self._attempt()) is not None:
            if not self.wait:
                raise ExperimentLeased(
                    f"experiment {self.experiment!r} is being measured by another job: {describe(blocking)}",
                    hint=_REFUSAL_HINT.format(ttl=_ttl(blocking)),
                )
            time.sleep(self.poll_s)

    def renew(self) -> bool:
        """Move the expiry on; False when the lease is no longer this holder's."""
        now = utcnow()
        moved = self._execute(
            update(_TABLE).where(*self._mine()).values(heartbeat_at=now, expires_at=self._expiry(now))
        )
        return moved.rowcount == 1

    def release(self) -> None:
        """Give the lease back (never one another job has taken over)."""
        self._execute(delete(_TABLE).where(*self._mine()))

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.ttl_s / 4):
            try:
                if not self.renew():
                    self.lost = True
                    return
            except StoreError:
                pass  # the database did not answer this time; the lease lasts ttl_s, the next beat tries again

    def _attempt(self) -> Row | None:
        """One try at taking the lease: None when taken, else the live lease that blocks it."""
        for _ in range(_RACES):
            try:
                with self.engine.begin() as connection:
                    return self._take(connection)
            except (IntegrityError, _Raced):
                continue  # another job wrote the lease between our read and our write: read it again
            except SQLAlchemyError as exc:
                reason, hint = explain(exc)
                raise StoreError(
                    f"cannot take the lease of experiment {self.experiment!r}: {reason}", hint=hint
                ) from exc
        raise StoreError(
            f"the lease of experiment {self.experiment!r} kept changing under {_RACES} attempts",
            hint="Several jobs are starting this experiment at once; run it again.",
        )

    def _take(self, connection) -> Row | None:
        now = utcnow()
        seen = connection.execute(select(_TABLE).where(_TABLE.c.experiment == self.experiment)).first()
        if seen is not None and _live(seen, now):
            return seen
        values = dict(
            holder=self.holder.id,
            host=self.holder.host,
            pid=self.holder.pid,
            process_started=self.holder.started,
            acquired_at=now,
            heartbeat_at=now,
            expires_at=self._expiry(now),
        )
        if seen is None:
            connection.execute(insert(_TABLE).values(experiment=self.experiment, **values))
        elif (
            connection.execute(
                update(_TABLE)
                .where(
                    _TABLE.c.experiment == self.experiment,
                    _TABLE.c.holder == seen.holder,
                    _TABLE.c.heartbeat_at == seen.heartbeat_at,
                )
                .values(**values)
            ).rowcount
            != 1
        ):
            raise _Raced()
        _interrupt_running(connection, self.experiment, seen)
        return None

    def _mine(self) -> tuple:
        return _TABLE.c.experiment == self.experiment, _TABLE.c.holder == self.holder.id

    def _expiry(self, now):
        return now + timedelta(seconds=self.ttl_s)

    def _execute(self, statement):
        try:
            with self.engine.begin() as connection:
                return connection.execute(statement)
        except SQLAlchemyError as exc:
            reason, hint = explain(exc)
            raise StoreError(
                f"results database write failed (lease of {self.experiment!r}): {reason}", hint=hint
            ) from exc


_REFUSAL_HINT = (
    "Wait for it to finish, or run again with --wait to start as soon as it does. A holder that died is "
    "taken over: at once from its own host, {ttl:.0f} s after its last heartbeat from any other."
)


class _Raced(Exception):
    """Another job took the lease over between our read and our write."""


def live_holder(engine: Engine, experiment: str) -> str | None:
    """Who holds the experiment's lease now (described), or None when it is free or its holder is gone."""
    with engine.connect() as connection:
        seen = connection.execute(select(_TABLE).where(_TABLE.c.experiment == experiment)).first()
    return describe(seen) if seen is not None and _live(seen, utcnow()) else None


def describe(lease: Row) -> str:
    """pid 12 on host h (holder h:12:1700000000), since 2026-01-01 12:00:00 UTC, last heartbeat 3 s ago."""
    beat = (utcnow() - as_utc(lease.heartbeat_at)).total_seconds()
    return (
        f"pid {lease.pid} on host {lease.host} (holder {lease.holder}), "
        f"since {as_utc(lease.acquired_at):%Y-%m-%d %H:%M:%S} UTC, last heartbeat {beat:.0f} s ago"
    )


def _live(lease: Row, now) -> bool:
    return as_utc(lease.expires_at) > now and not Holder(lease.host, lease.pid, lease.process_started).is_gone()


def _ttl(lease: Row) -> float:
    return (as_utc(lease.expires_at) - as_utc(lease.heartbeat_at)).total_seconds()


def _interrupt_running(connection, experiment: str, previous: Row | None) -> None:
    """The experiment's runs still `running`: their job is gone (we hold the lease now), so they are interrupted."""
    job = f"its job (pid {previous.pid} on host {previous.host})" if previous is not None else "the job"
    running = (
        select(Run.id)
        .join(CandidateRow)
        .join(Experiment)
        .where(Experiment.name == experiment, Run.status == RunStatus.RUNNING)
    )
    connection.execute(
        update(_RUNS)
        .where(_RUNS.c.id.in_(running))
        .values(status=RunStatus.INTERRUPTED, reason=f"{job} stopped before this run finished")
    )
