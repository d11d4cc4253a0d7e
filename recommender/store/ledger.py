"""The run ledger: the life of a run (start, finish, prune, promote), written by the job, read back as plain data.

    ledger.start(candidate_id, protocol, run_dir, hardware, backend, payload) -> OpenRun
    ledger.finish(run, status, reason, ...)        closes it
    ledger.promote(probe, fields, reason, run_dir) -> OpenRun   the probe stored ok, the full measurement opened
    ledger.prune(candidate_id, protocol, reason)   adaptive search took the candidate out of the race
    ledger.final(candidate_id, protocol) -> StoredRun | None    what the reuse check reads
    ledger.add_repeat(run_id, windows, headline, server_stats)   a finished run measured once more (job/tiebreak.py)

The job reads frozen dataclasses from here, never ORM rows or their raw JSON; results.py keeps the reads of reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from recommender.candidates import RunStatus
from recommender.metrics.headline import Headline, Measured
from recommender.metrics.steady import Window
from recommender.store.results import BUDGET_SKIP, ResultStore


@dataclass(frozen=True)
class OpenRun:
    """A started run: where its artifacts go and what it serves on (a promoted run keeps the rest)."""

    run_id: int
    candidate_id: int
    protocol: str
    run_dir: Path
    hardware: dict[str, Any] | None
    backend: str | None
    payload: dict[str, Any] | None = None


@dataclass(frozen=True)
class StoredRun:
    """A candidate's newest final run under one protocol, as the reuse check reads it."""

    run_id: int
    status: RunStatus
    reason: str | None
    repeats: int  # the measurement's repeats (1 for a run without figures)
    correctness: dict[str, Any] | None
    budget_skipped: bool
    measured: bool = True  # False: stored without figures (pruned by the grid's structure before any probe)
    most_repeats: int | None = None  # the most repeats its stopping rule allowed (None: stored before it was kept)

    def complete(self, repeats: int) -> bool:
        """Measured in full for work asking up to `repeats` repeats: ended by its stopping rule (see Measured)."""
        return Measured(repeats=self.repeats, most_repeats=self.most_repeats).complete(repeats)


def budget_reason(text: str) -> str:
    """A budget refusal's stored reason (the prefix older readers look for; the stored flag is what counts now)."""
    return BUDGET_SKIP + text


@dataclass(frozen=True)
class RunLedger:
    store: ResultStore

    def start(
        self,
        candidate_id: int,
        protocol: str,
        run_dir: Path,
        hardware: dict | None,
        backend: str | None,
        payload: dict | None = None,
    ) -> OpenRun:
        run_id = self.store.start_run(
            candidate_id, protocol, str(run_dir.resolve()), hardware=hardware, backend=backend, payload=payload
        )
        return OpenRun(run_id, candidate_id, protocol, run_dir, hardware, backend, payload)

    def finish(
        self,
        run: OpenRun,
        status: RunStatus,
        reason: str | None = None,
        fields: dict[str, Any] | None = None,
        correctness: dict | None = None,
        budget_skipped: bool = False,
    ) -> None:
        """Close the run; `fields` are the measurement's (measurement/load_search.py store_fields)."""
        figures = {"reason": reason, "correctness": correctness, **(fields or {})}
        self.store.finish_run(run.run_id, status, budget_skipped=budget_skipped, **figures)

    def promote(self, probe: OpenRun, fields: dict[str, Any], reason: str | None, run_dir: Path) -> OpenRun:
        """Adaptive search: the probe stays stored as an ok run of its own; the full measurement on the same
        deployment gets a new run (artifacts under `run_dir`), which is returned."""
        self.finish(probe, RunStatus.OK, reason=reason, fields=fields)
        opened = self.start(probe.candidate_id, probe.protocol, run_dir, probe.hardware, probe.backend, probe.payload)
        return replace(opened, run_dir=run_dir)

    def add_repeat(
        self, run_id: int, windows: Sequence[tuple[int, Window]], headline: Headline, server_stats: dict[str, Any]
    ) -> None:
        """A further repeat of a finished run: its windows, and the headline and server figures decided again."""
        self.store.add_repeat(run_id, windows, headline, server_stats)

    def prune(self, candidate_id: int, protocol: str, reason: str) -> None:
        self.store.prune(candidate_id, protocol, reason)

    def final(self, candidate_id: int, protocol: str) -> StoredRun | None:
        """The newest run when it is final (not measured again unless --fresh); None otherwise."""
        run = self.store.final_run(candidate_id, protocol)
        if run is None:
            return None
        headline = run.headline or {}
        return StoredRun(
            run.id,
            RunStatus(run.status),
            run.reason,
            headline.get("repeats", 1),
            run.correctness,
            run.budget_skipped,
            run.headline is not None,
            headline.get("most_repeats"),
        )
