"""Why the load child ended a run early: a kind and the figures in words, stored as one line of text.

The stored text is "<kind>: <figures>" (e.g. "latency: p95 above 500 ms in 3 consecutive windows (...)"), as it
always was; `StopReason.parse` reads a stored line back once, so no reader matches prefixes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class StopKind(StrEnum):
    """The stop condition that fired (the values are the stored text's heads)."""

    LATENCY = "latency"  # the latency percentile above the threshold in consecutive windows
    ERROR_RATE = "error rate"  # the error rate above the limit over the last windows
    MAX_INVOCATIONS = "max invocations"  # a window reached the invocations-per-minute limit
    FLAT_INVOCATIONS = "flat invocations"  # a higher load level was no faster than the one before
    PRECISION = "precision reached"  # the last level's figures are known to `traffic.precision` (not a limit)
    OTHER = "other"  # a stored line of no known kind (shown as its own head)


@dataclass(frozen=True)
class StopReason:
    kind: StopKind
    figures: str  # what was measured, in words: "p95 above 500 ms in 3 consecutive windows (600.0, ... ms)"
    head: str = ""  # the stored head of a line of kind OTHER

    @property
    def label(self) -> str:
        """The short name of the stop, for a table cell."""
        return self.head if self.kind is StopKind.OTHER else self.kind.value

    @property
    def text(self) -> str:
        """The line as stored and shown."""
        if self.kind is StopKind.OTHER:
            return f"{self.head}:{self.figures}" if self.figures else self.head
        return f"{self.kind}: {self.figures}"

    def __str__(self) -> str:
        return self.text

    @classmethod
    def parse(cls, text: str) -> StopReason:
        """A stored line read back: its kind from the head before the first colon."""
        head, colon, rest = text.partition(":")
        known = {kind.value: kind for kind in StopKind if kind is not StopKind.OTHER}
        if head in known and colon:
            return cls(known[head], rest.removeprefix(" "))
        return cls(StopKind.OTHER, rest, head=head)
