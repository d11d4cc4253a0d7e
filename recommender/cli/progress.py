"""Rich progress bars for the main job: one bar for the candidates, one for the current candidate's load."""

from __future__ import annotations

from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from recommender.candidates import Candidate, RunStatus

STATUS_STYLE = {
    RunStatus.OK: "green",
    RunStatus.FAILED: "red",
    RunStatus.SKIPPED: "yellow",
    RunStatus.INTERRUPTED: "magenta",
    RunStatus.PRUNED: "cyan",
}


class ProgressReporter:
    """Implements pipeline.Reporter on a rich Progress display."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[detail]}"),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self.overall: TaskID | None = None
        self.current: TaskID | None = None
        self.current_key: str | None = None  # the candidate the load bar belongs to
        self.counted: set[str] = set()  # candidate keys the overall bar has counted

    def __enter__(self) -> ProgressReporter:
        self.progress.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.progress.__exit__(kind, error, trace)

    def candidate_started(self, candidate: Candidate, index: int, total: int, load_seconds: float) -> None:
        if self.overall is None:
            self.overall = self.progress.add_task("candidates", total=total, detail="")
        if self.current is not None:
            self.progress.remove_task(self.current)
        self.current = self.progress.add_task(f"  {candidate.name}", total=int(load_seconds), detail="")
        self.current_key = candidate.key

    def stage(self, candidate: Candidate, text: str) -> None:
        if self.current is not None:
            self.progress.update(self.current, detail=text)

    def load_progress(self, candidate: Candidate, elapsed_s: float, users: int, requests: int, failures: int) -> None:
        detail = f"{users} users, {requests} requests, {failures} failed"
        if self.current is not None:
            completed = min(int(elapsed_s), self.progress.tasks[-1].total or 0)
            self.progress.update(self.current, completed=completed, detail=detail)

    def candidate_finished(self, candidate: Candidate, status: RunStatus, reason: str | None, reused: bool) -> None:
        style = STATUS_STYLE.get(status, "white")
        note = " (stored, not measured again)" if reused else ""
        why = f": {reason}" if reason else ""
        self.progress.console.print(f"[{style}]{status:>8}[/] {candidate.name}{note}{why}", highlight=False)
        # only its own bar: adaptive search prunes other candidates (never deployed, or probed earlier) after the
        # last one started, and their status must not land on its bar
        if self.current is not None and candidate.key == self.current_key:
            self.progress.update(self.current, completed=self.progress.tasks[-1].total, detail=status)
        # adaptive search: a probe's candidate is pruned after it, counted once
        if self.overall is not None and candidate.key not in self.counted:
            self.counted.add(candidate.key)
            self.progress.advance(self.overall)
