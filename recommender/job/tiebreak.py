"""Decide, don't only measure: after the search, while #1 and #2 are tied and the budget allows, measure both more,
paired and alternating on the same host (A, B, A, B, ...: each round one further repeat of each one's level, on a
deployment of its own), until they separate, separating them is out of reach, or the budget is spent; then store
what the extra time bought with both runs (decide/tiebreak.py says whom, whether, and the sentence).

    TieBreak(context, store, protocols).run() -> sentence | None

Each further repeat is stored in its candidate's run at once (windows added, headline decided again): the run keeps
its reuse key, and a resumed job counts the seconds spent before (`Extra`, in the run's server_stats) against the
same budget, so an interrupted tie-break goes on where it stopped and a finished one is not measured again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

from recommender.candidates import CandidateResult, expand_candidates, target_index
from recommender.decide.budget import estimate_plan
from recommender.decide.recommendation import recommend
from recommender.decide.tiebreak import KEY, KNOWN, Extra, bought, extra_budget, measured_seconds, pair_to_measure
from recommender.decide.tiebreak import round_seconds as estimate_round
from recommender.decide.tiebreak import spent as spent_on
from recommender.errors import RecommenderError
from recommender.job.candidate_run import CandidateRun
from recommender.job.context import RunContext, WorkItem
from recommender.metrics.rules import Rules
from recommender.review import decided_from_store
from recommender.search import Work
from recommender.store.results import ResultStore


@dataclass(frozen=True)
class TieBreak:
    context: RunContext
    store: ResultStore
    protocols: frozenset[str]

    def run(self) -> str | None:
        """Measure the tied leaders more while it may help and fits; the sentence saying what it bought (None:
        nothing was measured more, now or before)."""
        spec = self.context.spec
        results = self._results()
        budget = extra_budget(spec.decision.max_extra_seconds, measured_seconds(results))
        while (pair := self._next_pair(results, budget)) is not None:
            for result in pair:  # A then B: the pair measured under the same conditions, one after the other
                if not self._measure_more(result):
                    return self._outcome(self._results())
            results = self._results()
        return self._outcome(results)

    @property
    def _known(self) -> float:
        """The precision asked for (traffic.until_known), or the default's where it is off."""
        return Rules.from_spec(self.context.spec).stop.known_within or KNOWN

    def _results(self) -> list[CandidateResult]:
        return decided_from_store(self.store, self.context.spec.name, self.context.spec, self.protocols)

    def _next_pair(self, results: list[CandidateResult], budget: float) -> tuple[CandidateResult, ...] | None:
        """#1 and #2 as stored, when tied, not both known, and a round fits what is left of the budget and the time
        budget; None otherwise."""
        spec = self.context.spec
        leaders = pair_to_measure(recommend(results, spec).ranking, self._known)
        if leaders is None:
            return None
        by_key = {r.key: r for r in results}
        pair = tuple(by_key[ranked.candidate.key] for ranked in leaders)
        needed = estimate_round(pair)
        deadline = self.context.deadline
        if needed is None or spent_on(results) + needed > budget:
            return None
        if deadline is not None and time.monotonic() + needed > deadline:
            return None
        return pair

    def _measure_more(self, result: CandidateResult) -> bool:
        """One further repeat of `result`'s run, stored with it; False when it could not be measured (said as a
        stage; the stored run is left as it was)."""
        context = self.context
        candidate = next(c for c in expand_candidates(context.spec) if c.key == result.key)
        placement = context.placements[target_index(context.spec, candidate)]
        item = WorkItem(Work(candidate, "full"), placement, 0, 1)
        assert result.run_id is not None and result.headline is not None  # ranked: measured
        extra = Extra.of(result.server_stats)
        run_dir = context.options.run_root / context.spec.name / f"{candidate.name}-{candidate.key[:8]}"
        refusal = context.budget.admit(estimate_plan(context.spec, 1, placement.spec).usd)
        if refusal is not None:
            context.reporter.stage(candidate, f"not measured more: {refusal}")
            return False
        run = CandidateRun(context, item, 0, None, lambda work, headline: None)
        try:
            records = self.store.window_records(result.run_id)
            more = run.measure_more(result, records, run_dir / f"more-{extra.repeats + 1}")
        except RecommenderError as exc:
            context.reporter.stage(candidate, f"not measured more: {exc.message.splitlines()[0]}")
            return False
        grown = Extra(extra.repeats + 1, extra.seconds + sum(run.clock.seconds.values()))
        more = replace(more, server_stats=more.server_stats | {KEY: grown.to_dict()})
        context.ledger.add_repeat(result.run_id, more.windows, more.headline, more.server_stats)
        return True

    def _outcome(self, results: list[CandidateResult]) -> str | None:
        """What the extra time bought, stored with #1's and #2's runs (so `rank` and `report` say it too)."""
        extras = {r.key: Extra.of(r.server_stats) for r in results}
        ranking = recommend(results, self.context.spec).ranking
        sentence = bought(ranking, extras, self._known)
        if sentence is None:
            return None
        for ranked in ranking.ranked[:2]:
            result = next(r for r in results if r.key == ranked.candidate.key)
            if result.run_id is not None and result.headline is not None:
                kept = replace(extras[result.key], outcome=sentence).to_dict()
                self.store.set_server_stats(result.run_id, (result.server_stats or {}) | {KEY: kept})
        return sentence
