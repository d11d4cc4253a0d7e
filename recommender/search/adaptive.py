"""Adaptive search in two rungs of successive halving: a brief load search (probe) on the candidates the climb along
the grid's unimodal axes reaches (search/structure.py `Climb`; every candidate with `search.unimodal: []`), or on
those the sampler proposes for numeric ranges; then, best probe first, the full measurement of those whose probe
could still change the pick, each judged at its turn against the candidates measured in full so far (racing.judge:
the incumbent rule with successive halving's cap). The others are pruned, keeping their probe's figures (if any) and
the reason.

Why the probes come first: judged the moment it was probed (the search before), a candidate was measured in full
whenever it was within reach of the leader found so far, so the cap filled with whatever came first in the grid's
order and a later, better probe cost one more full measurement (the tiny model: 5 full measurements, 137 of its 241
s, where Model Analyzer's quick search took 209 s). Ranked first, the best probe is measured first, and a probe below
its lower bound is pruned without a full measurement. A full measurement then deploys the candidate again (the tiny
model: about 4 s of the ~31 s it costs); the last probe, when it is the best, keeps its deployment (`follow`).

Do not probe what cannot win: a candidate no climb reached, one past a fall along a unimodal axis of the grid whose
bound from that fall is below the leader's lower bound, and one that is the same server as a probed candidate are
pruned without a deployment, with the reason (search/structure.py). Until a full
measurement exists the leader's lower bound is the best probe less the racing margin (a probe has no interval). A
probe tries the plan's highest load first (capacity first: the most the candidate serves within the limits, what
racing judges) and only searches lower when that level breaches.

Ask/tell: ask() hands out the probes, then each full measurement (`final`, at the level its probe found) or prune;
tell() hears every stored result. Results reused from an earlier run (resume) count as they were stored: a stored
full measurement is in the field already. Candidates left out by the budget are recorded as skipped for budget (store
BUDGET_SKIP: a larger budget measures them); the budget bounds the probes, and the full measurements of the
candidates probed follow.
"""

from __future__ import annotations

import copy
import time
from collections import deque
from collections.abc import Callable

from recommender.candidates import Candidate, CandidateResult, RunStatus, target_index
from recommender.metrics.headline import Headline
from recommender.search.plan import planned_total
from recommender.search.racing import Entrant, judge, keep_count
from recommender.search.sampler import Sampler
from recommender.search.structure import Climb, cannot_win, same_as
from recommender.search.work import Work
from recommender.spec import ExperimentSpec


class AdaptiveSearch:
    independent = False  # each result shapes the next question: one candidate at a time

    def __init__(
        self, spec: ExperimentSpec, candidates: list[Candidate], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.search, self.clock, self.started = spec.search, clock, clock()
        self.spec = spec
        self.sampler = Sampler(spec) if spec.variants.ranged_axes() else None
        self.climb = Climb(candidates, spec.search.unimodal) if not self.sampler and spec.search.unimodal else None
        self.pending = deque(() if self.sampler or self.climb else candidates)
        self.candidates = [] if self.sampler else list(candidates)
        self.known: dict[str, float] = {}  # key -> probe IPM for the climb (0: met no level or cannot win)
        self.total = planned_total(spec, len(candidates))  # candidates it may probe
        self.keep = keep_count(self.total, self.search.racing.eta)
        self.probing = True  # the first rung; then the full measurements, best probe first
        self.probed: set[str] = set()
        self.full: dict[str, Entrant] = {}  # measured in full: the leaders' field
        self.judged: set[str] = set()  # probes judged for a full measurement (measured, queued or pruned)
        self.queue: deque[Work] = deque()
        self.probes: dict[str, tuple[Candidate, Headline]] = {}  # key -> probed candidate and its probe's headline

    def ask(self) -> Work | None:
        if self.queue:
            return self.queue.popleft()
        if self.probing:
            work = self._next_probe()
            if work is not None:
                return work
            self.probing = False
        return self._next_judged()

    def follow(self, work: Work, headline: Headline) -> Work | None:
        """Right after a probe, on its deployment: its full measurement when it is the last probe and the best one
        (it would be judged first anyway), else None (judged after every probe)."""
        self.probes[work.candidate.key] = (work.candidate, headline)
        if self._more_to_probe(work.candidate.key, headline.objective) or self._budget_spent() is not None:
            return None
        best = self._best_unjudged()
        if best is None or best[0].key != work.candidate.key:
            return None
        return self._judge(work.candidate, headline)

    def tell(self, work: Work, result: CandidateResult) -> None:
        key = work.candidate.key
        if work.stage == "probe":
            self.probed.add(key)
            ipm = result.headline.objective if result.headline is not None else None
            self.known[key] = ipm or 0.0
            if self.climb is not None:
                self.climb.probed.add(key)
            if self.sampler is not None:
                self.sampler.tell(work.candidate, _objective(result))
            if result.headline is not None and result.status in (RunStatus.OK, RunStatus.PRUNED):
                self.probes.setdefault(key, (work.candidate, result.headline))
        headline, full = result.headline, self.search.racing.final_repeats
        if result.status == RunStatus.OK and headline is not None and headline.complete(full):
            self.full[key] = _entrant(work.candidate, headline)  # measured in full, ended by its rule (or reused so)
            self.judged.add(key)

    def _next_probe(self) -> Work | None:
        stop = self._budget_spent()
        if stop:
            self.queue.extend(Work(c, "skip", reason=stop) for c in self._unasked())  # recorded under BUDGET_SKIP
            self.pending.clear()
            self.climb, self.candidates = None, []
            return self.queue.popleft() if self.queue else None
        candidate = self._next_candidate()
        probed = [(c, h.objective) for c, h in self.probes.values()]
        if candidate is None:
            if self.climb is not None:  # every slice's climb has stopped: the rest were not on the way
                for left in self._unasked():
                    twin = same_as(left, probed)  # the same server as a probed one says more than "not reached"
                    reason = twin[0] if twin else self.climb.unreached(left, self.known)
                    self.queue.append(Work(left, "prune", reason=reason))
                self.candidates = []
            return self.queue.popleft() if self.queue else None
        twin = same_as(candidate, probed)
        why = twin[0] if twin else None
        why = why or cannot_win(candidate, probed, self.search.unimodal, self.search.racing.margin, self._leader_low())
        if why is not None:  # never deployed: stored as pruned with the reason
            self.known[candidate.key] = (twin[1] or 0.0) if twin else 0.0
            if self.sampler is not None:
                self.sampler.tell(candidate, None)
            return Work(candidate, "prune", reason=why)
        return Work(
            candidate,
            "probe",
            knee_tolerance=self.search.knee_tolerance,
            seconds=self.search.racing.probe_seconds,
            capacity_first=True,
            bisect=self._generative(candidate),
        )

    def _generative(self, candidate: Candidate) -> bool:
        """A generative candidate's probe bisects the load axis for its goodput under the SLOs."""
        return self.spec.all_targets[target_index(self.spec, candidate)].generative

    def _next_candidate(self) -> Candidate | None:
        if self.sampler is not None:
            return self.sampler.ask()
        if self.climb is not None:
            return self.climb.next(self.known)
        return self.pending.popleft() if self.pending else None

    def _unasked(self) -> list[Candidate]:
        """Candidates of the grid not handed out yet (neither probed nor ruled on)."""
        return list(self.pending) or [
            c for c in self.candidates if c.key not in self.known and c.key not in self.probed
        ]

    def _more_to_probe(self, key: str, ipm: float | None) -> bool:
        """Whether a candidate may still be probed once this probe is told (a dry run of the climb)."""
        if self.sampler is not None:
            return True
        if self.climb is None:
            return bool(self.pending)
        return copy.deepcopy(self.climb).next(self.known | {key: ipm or 0.0}) is not None

    def _next_judged(self) -> Work | None:
        """The best probe not yet judged: its full measurement (on a deployment of its own) or its prune."""
        best = self._best_unjudged()
        if best is None:
            return None
        full = self._judge(*best)
        return full if full is not None else self.queue.popleft()

    def _judge(self, candidate: Candidate, headline: Headline) -> Work | None:
        """The full measurement `candidate`'s probe earns against the field measured in full so far, or None with
        its prune queued."""
        self.judged.add(candidate.key)
        measure, why = judge(
            _entrant(candidate, headline), list(self.full.values()), self.search.racing.margin, self.keep
        )
        if not measure:
            self.queue.append(Work(candidate, "prune", reason=f"pruned by racing: {why}"))
            return None
        return Work(
            candidate,
            "final",
            repeats=self.search.racing.final_repeats,
            level=headline.level_load,
            reason=f"measured in full, best probe first: {why}",
        )

    def _best_unjudged(self) -> tuple[Candidate, Headline] | None:
        """The probed candidate with the highest probe not judged yet (one that met no level comes last)."""
        waiting = [(c, h) for key, (c, h) in self.probes.items() if key not in self.judged]
        return max(waiting, key=lambda pair: pair[1].objective or -1.0, default=None)

    def _leader_low(self) -> float | None:
        """The leader's lower bound for the structure rule: the best full measurement's, else the best probe less
        the racing margin (a probe has no interval), else None (nothing met the limits yet)."""
        measured = [e.low for e in self.full.values() if e.max_invocations is not None]
        if measured:
            return max(measured)
        probes = [h.objective for _, h in self.probes.values() if h.objective is not None]
        return max(probes) / (1 + self.search.racing.margin) if probes else None

    def _budget_spent(self) -> str | None:
        budget = self.search.budget
        limit = self.total if (budget.candidates or self.sampler) else None
        if limit is not None and len(self.probed) >= limit:
            return f"the search budget of {limit} candidates was spent before this one (not measured)"
        if budget.minutes is not None and self.clock() - self.started >= budget.minutes * 60:
            return f"the search budget of {budget.minutes:g} minutes was spent before this one (not measured)"
        return None


def _entrant(candidate: Candidate, headline: Headline) -> Entrant:
    """The candidate as racing judges it: on its objective (goodput per minute for a generative one)."""
    unit = "IPM" if headline.generation is None else "good requests/min"
    return Entrant(candidate.key, candidate.name, headline.objective, headline.objective_interval, unit)


def _objective(result: CandidateResult) -> float | None:
    headline = result.headline
    return headline.objective if result.status == RunStatus.OK and headline is not None else None
