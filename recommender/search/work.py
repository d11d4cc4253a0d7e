"""What a search strategy hands the job: one piece of work at a time (ask), and what the job tells it back (tell).

stage  full   measure the candidate with the experiment's whole traffic plan (grid search)
       probe  a load search, 1 short repeat per tried level, the highest level first (adaptive search); a
              generative candidate's bisects the load axis (measurement/load_search.Bisection)
       final  `repeats` load runs at the level the probe found (adaptive search, after every probe: on a deployment of
              its own, or on the probe's when `follow` asks for it right after the last probe)
       prune  no measurement: the candidate's latest run becomes `pruned`, with `reason`
       skip   no measurement: the candidate is recorded as not measured, with `reason` (e.g. the search budget)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from recommender.candidates import Candidate, CandidateResult

Stage = Literal["full", "probe", "final", "prune", "skip"]
MEASURING = ("full", "probe", "final")


@dataclass(frozen=True)
class Work:
    candidate: Candidate
    stage: Stage
    repeats: int = 1  # a stored run with fewer repeats is not reused for this work
    level: float | None = None  # final: the offered load to measure at
    reason: str | None = None  # prune / skip: why
    knee_tolerance: float = 0.05  # probe: where the load search stops
    seconds: float | None = None  # probe: each tried level runs this long (None: the traffic plan's duration)
    capacity_first: bool = False  # probe: the highest level first, found there when it meets the limits
    bisect: bool = False  # probe: bisect the load axis for the highest level meeting the SLOs (a generative one)

    @property
    def measures(self) -> bool:
        return self.stage in MEASURING


class Strategy(Protocol):
    """A search strategy as an ask/tell object; `total` is how many pieces of work it expects (for progress)."""

    total: int
    # True: every piece of work is known up front (ask() never waits on tell()), so it may run in parallel
    independent: bool

    def ask(self) -> Work | None: ...

    def follow(self, work: Work, headline) -> Work | None:
        """Right after `work` measured, on the same deployment: more work to measure there, or None."""

    def tell(self, work: Work, result: CandidateResult) -> None: ...
