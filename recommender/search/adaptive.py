"""Adaptive search: a brief load search on every candidate (or on those the sampler proposes, for numeric ranges),
then racing: the candidates whose MaxInvocations interval could still contain the best are measured again at their
found level (`racing.final_repeats` repeats); the others are pruned, keeping their partial figures and the reason.

Ask/tell: ask() hands out probes until the candidates (or the budget) run out, then the race's prunes and finals.
Candidates of the grid left out by the budget are recorded as skipped for budget (store BUDGET_SKIP: a larger budget
measures them).
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from recommender.candidates import Candidate, CandidateResult
from recommender.search.racing import Entrant, race
from recommender.search.sampler import Sampler
from recommender.search.work import Work
from recommender.spec import ExperimentSpec

SAMPLED = 20  # candidates the sampler proposes when the budget names none (a range's space can be in the hundreds)


class AdaptiveSearch:
    def __init__(self, spec: ExperimentSpec, candidates: list[Candidate], clock: Callable[[], float] = time.monotonic) -> None:
        self.search, self.clock, self.started = spec.search, clock, clock()
        self.sampler = Sampler(spec) if spec.variants.ranged_axes() else None
        self.pending = deque(() if self.sampler else candidates)
        budget = self.search.budget.candidates
        self.total = min(budget or len(candidates), len(candidates)) if not self.sampler else (budget or SAMPLED)
        self.probed: dict[str, tuple[Candidate, CandidateResult]] = {}
        self.queue: deque[Work] = deque()
        self.raced = False

    def ask(self) -> Work | None:
        if not self.queue and not self.raced:
            probe = self._probe()
            if probe is not None:
                return probe
            self._race()
        return self.queue.popleft() if self.queue else None

    def tell(self, work: Work, result: CandidateResult) -> None:
        if work.stage != "probe":
            return
        self.probed[work.candidate.key] = (work.candidate, result)
        if self.sampler is not None:
            self.sampler.tell(work.candidate, _max_invocations(result))

    def _probe(self) -> Work | None:
        stop = self._budget_spent()
        if stop:
            self.queue.extend(Work(c, "skip", reason=stop) for c in self.pending)  # recorded under BUDGET_SKIP
            self.pending.clear()
            return None
        candidate = self.sampler.ask() if self.sampler else (self.pending.popleft() if self.pending else None)
        return None if candidate is None else Work(candidate, "probe", knee_tolerance=self.search.knee_tolerance)

    def _budget_spent(self) -> str | None:
        budget = self.search.budget
        limit = budget.candidates or (SAMPLED if self.sampler else None)
        if limit is not None and len(self.probed) >= limit:
            return f"the search budget of {limit} candidates was spent before this one (not measured)"
        if budget.minutes is not None and self.clock() - self.started >= budget.minutes * 60:
            return f"the search budget of {budget.minutes:g} minutes was spent before this one (not measured)"
        return None

    def _race(self) -> None:
        self.raced = True
        measured = {k: (c, r) for k, (c, r) in self.probed.items() if r.status == "ok" and r.headline is not None}
        entrants = [Entrant(k, c.name, _max_invocations(r), r.headline.ipm_interval) for k, (c, r) in measured.items()]
        verdict = race(entrants, self.search.racing.margin, self.search.racing.eta)
        self.queue.extend(Work(measured[k][0], "prune", reason=f"pruned by racing: {why}") for k, why in verdict.pruned.items())
        repeats = self.search.racing.final_repeats
        self.queue.extend(Work(measured[k][0], "final", repeats=repeats, level=measured[k][1].headline.level_load)
                          for k in verdict.survivors)
        self.total = len(self.probed) + len(verdict.survivors)


def _max_invocations(result: CandidateResult) -> float | None:
    headline = result.headline
    return headline.max_invocations if result.status == "ok" and headline is not None else None
