"""Adaptive search: a brief load search (probe) on every candidate, or on those the sampler proposes for numeric
ranges, each judged at once against the candidates measured in full so far (racing.judge: the incumbent rule with
successive halving's cap). A candidate that may still be the best is measured in full right away on the SAME
deployment (`follow`, called by the job between the probe and the teardown: no second deployment); the others are
pruned, keeping their probe's figures and the reason.

Do not probe what cannot win: a candidate past a fall along a unimodal axis of the grid, whose bound from that
fall is below the leader's lower bound (search/structure.py), is pruned without a deployment, with the reason. A
probe tries the plan's highest load first (capacity first: the most the candidate serves within the limits, what
racing judges) and only searches lower when that level breaches.

Ask/tell: ask() hands out probes, each followed by its prune when judged out; tell() hears every stored result.
A probe reused from an earlier run (resume) is judged in tell(); if it is to be measured in full and was not, a
`final` work measures it on a deployment of its own. Candidates left out by the budget are recorded as skipped for
budget (store BUDGET_SKIP: a larger budget measures them).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable

from recommender.candidates import Candidate, CandidateResult, RunStatus
from recommender.metrics.headline import Headline
from recommender.search.plan import planned_total
from recommender.search.racing import Entrant, judge, keep_count
from recommender.search.sampler import Sampler
from recommender.search.structure import cannot_win
from recommender.search.work import Work
from recommender.spec import ExperimentSpec


class AdaptiveSearch:
    independent = False  # each result shapes the next question: one candidate at a time

    def __init__(
        self, spec: ExperimentSpec, candidates: list[Candidate], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.search, self.clock, self.started = spec.search, clock, clock()
        self.sampler = Sampler(spec) if spec.variants.ranged_axes() else None
        self.pending = deque(() if self.sampler else candidates)
        self.total = planned_total(spec, len(candidates))  # candidates it may probe
        self.keep = keep_count(self.total, self.search.racing.eta)
        self.probed: set[str] = set()
        self.full: dict[str, Entrant] = {}  # measured in full: the leaders' field
        self.judged: set[str] = set()
        self.continued: set[str] = set()  # judged to be measured in full
        self.queue: deque[Work] = deque()
        self.probes: dict[str, tuple[Candidate, float | None]] = {}  # key -> probed candidate, its MaxInvocations

    def ask(self) -> Work | None:
        if self.queue:
            return self.queue.popleft()
        stop = self._budget_spent()
        if stop:
            self.queue.extend(Work(c, "skip", reason=stop) for c in self.pending)  # recorded under BUDGET_SKIP
            self.pending.clear()
            return self.queue.popleft() if self.queue else None
        candidate = self.sampler.ask() if self.sampler else (self.pending.popleft() if self.pending else None)
        if candidate is None:
            return None
        leader_low = max((e.low for e in self.full.values() if e.max_invocations is not None), default=None)
        why = cannot_win(
            candidate, list(self.probes.values()), self.search.unimodal, self.search.racing.margin, leader_low
        )
        if why is not None:  # never deployed: stored as pruned with the reason
            if self.sampler is not None:
                self.sampler.tell(candidate, None)
            return Work(candidate, "prune", reason=why)
        return Work(
            candidate,
            "probe",
            knee_tolerance=self.search.knee_tolerance,
            seconds=self.search.racing.probe_seconds,
            capacity_first=True,
        )

    def follow(self, work: Work, headline: Headline) -> Work | None:
        """Right after a probe, on its deployment: the full measurement to run there, or None (a prune is queued)."""
        self.judged.add(work.candidate.key)
        full, why = judge(
            _entrant(work.candidate, headline), list(self.full.values()), self.search.racing.margin, self.keep
        )
        if not full:
            self.queue.append(Work(work.candidate, "prune", reason=f"pruned by racing: {why}"))
            return None
        self.continued.add(work.candidate.key)
        return Work(
            work.candidate,
            "final",
            repeats=self.search.racing.final_repeats,
            level=headline.level_load,
            reason=f"measured in full on the probe's deployment: {why}",
        )

    def tell(self, work: Work, result: CandidateResult) -> None:
        key = work.candidate.key
        if work.stage == "probe":
            self.probed.add(key)
            if self.sampler is not None:
                self.sampler.tell(work.candidate, _max_invocations(result))
            if result.headline is not None and result.status in (RunStatus.OK, RunStatus.PRUNED):
                self.probes[key] = (work.candidate, result.headline.max_invocations)  # None: no level met the limits
        if result.status != RunStatus.OK or result.headline is None:
            return
        if key in self.continued or result.headline.repeats >= self.search.racing.final_repeats:
            self.full[key] = _entrant(work.candidate, result.headline)
        elif work.stage == "probe" and key not in self.judged:  # a probe reused from an earlier run
            follow = self.follow(work, result.headline)
            if follow is not None:
                self.queue.append(follow)

    def _budget_spent(self) -> str | None:
        budget = self.search.budget
        limit = self.total if (budget.candidates or self.sampler) else None
        if limit is not None and len(self.probed) >= limit:
            return f"the search budget of {limit} candidates was spent before this one (not measured)"
        if budget.minutes is not None and self.clock() - self.started >= budget.minutes * 60:
            return f"the search budget of {budget.minutes:g} minutes was spent before this one (not measured)"
        return None


def _entrant(candidate: Candidate, headline: Headline) -> Entrant:
    return Entrant(candidate.key, candidate.name, headline.max_invocations, headline.ipm_interval)


def _max_invocations(result: CandidateResult) -> float | None:
    headline = result.headline
    return headline.max_invocations if result.status == RunStatus.OK and headline is not None else None
