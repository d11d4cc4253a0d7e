"""Why a candidate cannot be recommended: typed reasons (a kind and the sentence shown), never parsed back."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class ExclusionKind(StrEnum):
    STATUS = "status"  # its run is not ok (failed, skipped, pruned, ...): the text carries the run's reason
    OVER_THRESHOLD = "over threshold"  # measured, but the measurement's own verdict: over the limits
    NO_INVOCATIONS = "no invocations"  # no successful invocations were measured
    NO_LATENCY = "no latency"  # a latency threshold is set and no latency was measured
    LATENCY = "latency"  # latency at the percentile above the threshold
    ERROR_RATE = "error rate"  # error rate above the limit


@dataclass(frozen=True)
class Exclusion:
    kind: ExclusionKind
    text: str  # the reason in plain words, as shown

    def __str__(self) -> str:
        return self.text
