"""Grid search: every candidate in order, each with the experiment's whole traffic plan (the default)."""

from __future__ import annotations

from collections import deque

from recommender.candidates import Candidate, CandidateResult
from recommender.search.work import Work


class GridSearch:
    independent = True  # no answer changes the questions: the job may measure several candidates at once

    def __init__(self, candidates: list[Candidate], repeats: int) -> None:
        self.queue = deque(Work(c, "full", repeats=repeats) for c in candidates)
        self.total = len(self.queue)

    def ask(self) -> Work | None:
        return self.queue.popleft() if self.queue else None

    def follow(self, work: Work, headline) -> None:
        """Nothing more on a deployment: each candidate's one measurement is already the full one."""

    def tell(self, work: Work, result: CandidateResult) -> None:
        """The grid measures everything whatever it hears."""
