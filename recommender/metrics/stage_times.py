"""Where a candidate's time went: seconds per stage of its run, measured by the job and stored with the run
(`server_stats["stages"]`), summed per experiment for the report.

    clock = StageClock(); with clock.timed("export"): ...   # clock.seconds -> {"export": 12.31, ...}
    time_spent([stages, ...])                                # the experiment's seconds per stage, in STAGES order

Stages, in the order a candidate goes through them: export (the model exported or taken from the cache, an engine
built, the repository written), deploy (server start and model load, until it is ready), probe (the first
inference), correctness (the gate against the reference), load (warm-up, every level and repeat the work measured;
a promoted probe's full measurement included), teardown (the server stopped).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Iterator, Mapping

STAGES = ("export", "deploy", "probe", "correctness", "load", "teardown")


class StageClock:
    """Seconds per stage, added up when a stage runs more than once (monotonic clock)."""

    def __init__(self) -> None:
        self._seconds: dict[str, float] = {}
        self._open: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, stage: str) -> Iterator[None]:
        self.start(stage)
        try:
            yield
        finally:
            self.stop(stage)

    def start(self, stage: str) -> None:
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; one of {', '.join(STAGES)}")
        self._open[stage] = time.monotonic()

    def stop(self, stage: str) -> None:
        """End `stage` (nothing when it was not started: a deployment that failed to start has no teardown)."""
        started = self._open.pop(stage, None)
        if started is not None:
            self._seconds[stage] = self._seconds.get(stage, 0.0) + time.monotonic() - started

    @property
    def seconds(self) -> dict[str, float]:
        """The finished stages, in STAGES order, rounded to 10 ms."""
        return {stage: round(self._seconds[stage], 2) for stage in STAGES if stage in self._seconds}


def time_spent(runs: Iterable[Mapping[str, float] | None]) -> dict[str, float]:
    """Seconds per stage over `runs` (each a run's stored stages; None for a run stored before they were kept)."""
    total: dict[str, float] = {}
    for stages in runs:
        for stage, seconds in (stages or {}).items():
            total[stage] = total.get(stage, 0.0) + float(seconds)
    return {stage: round(total[stage], 2) for stage in STAGES if stage in total}
