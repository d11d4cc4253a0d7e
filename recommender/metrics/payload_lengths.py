"""A payload's token lengths: how many input tokens its requests carry, as a histogram and the figures tokens are
counted by.

Input tokens are a request's own tokens ([CLS] and [SEP] included, padding not): the length of its unpadded token
row (load/payload.py `request_token_ids`). Requests cycle through the payload's rows, so a load run's mean input
tokens per request is the payload's mean; input tokens/s and cost per million tokens are reckoned from it (README
"Definitions").
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BINS = 16  # at most this many bins of equal width (whole tokens)


@dataclass(frozen=True)
class LengthBin:
    """Requests whose input tokens are from `low` to `high`, both included."""

    low: int
    high: int
    requests: int


@dataclass(frozen=True)
class PayloadLengths:
    """What a run's payload was: its fingerprint, where it came from, its requests and their token lengths."""

    fingerprint: str
    source: str
    requests: int
    min_tokens: int
    median_tokens: float
    mean_tokens: float
    max_tokens: int
    histogram: tuple[LengthBin, ...]

    def describe(self) -> str:
        """'2,000 requests from queries.jsonl; input tokens per request: 5 to 112, median 14, mean 19.3 (...).'"""
        return (
            f"{self.requests:,} requests from {self.source}; input tokens per request: {self.min_tokens} to "
            f"{self.max_tokens}, median {self.median_tokens:g}, mean {self.mean_tokens:,.1f} "
            f"(fingerprint {self.fingerprint})."
        )

    def histogram_rows(self) -> tuple[tuple[str, int, str], ...]:
        """The histogram as shown: input tokens ('5-11'), requests, share of the requests ('12%')."""
        return tuple(
            (f"{b.low}" if b.low == b.high else f"{b.low}-{b.high}", b.requests, f"{b.requests / self.requests:.0%}")
            for b in self.histogram
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "fingerprint": self.fingerprint,
            "source": self.source,
            "requests": self.requests,
            "min_tokens": self.min_tokens,
            "median_tokens": self.median_tokens,
            "mean_tokens": self.mean_tokens,
            "max_tokens": self.max_tokens,
            "histogram": [[b.low, b.high, b.requests] for b in self.histogram],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> PayloadLengths | None:
        """The stored payload of a run (None for a run stored before migration 0008)."""
        if not data:
            return None
        histogram = tuple(LengthBin(int(low), int(high), int(n)) for low, high, n in data.get("histogram", ()))
        fields = ("fingerprint", "source", "requests", "min_tokens", "median_tokens", "mean_tokens", "max_tokens")
        return cls(**{name: data[name] for name in fields}, histogram=histogram)


def payload_lengths(fingerprint: str, source: str, lengths: Sequence[int]) -> PayloadLengths:
    """The payload's figures from each request's input tokens, in request order."""
    if not lengths:
        raise ValueError("a payload holds at least one request")
    return PayloadLengths(
        fingerprint,
        source,
        len(lengths),
        min(lengths),
        float(statistics.median(lengths)),
        statistics.fmean(lengths),
        max(lengths),
        length_histogram(lengths),
    )


def length_histogram(lengths: Sequence[int], bins: int = BINS) -> tuple[LengthBin, ...]:
    """Equal-width bins of whole tokens from the shortest to the longest request (empty bins kept, so the shape
    reads true); at most `bins` of them."""
    low, high = min(lengths), max(lengths)
    width = max(1, math.ceil((high - low + 1) / bins))
    counts = [0] * ((high - low) // width + 1)
    for length in lengths:
        counts[(length - low) // width] += 1
    return tuple(LengthBin(low + i * width, low + (i + 1) * width - 1, n) for i, n in enumerate(counts))


def input_tokens_per_second(invocations_per_minute: float | None, mean_tokens: float | None) -> float | None:
    """Input tokens per second at a throughput: invocations per minute / 60 x mean input tokens per request."""
    if invocations_per_minute is None or mean_tokens is None:
        return None
    return invocations_per_minute / 60 * mean_tokens


def cost_per_million_tokens(cost_per_million_inferences: float | None, mean_tokens: float | None) -> float | None:
    """USD per million input tokens: cost per inference / mean input tokens per request x 1,000,000, that is the cost
    per million inferences / the mean input tokens per request."""
    if cost_per_million_inferences is None or not mean_tokens:
        return None
    return cost_per_million_inferences / mean_tokens
