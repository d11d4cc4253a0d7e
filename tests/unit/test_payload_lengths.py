"""A payload's token lengths (metrics/payload_lengths.py): the histogram's bins, the figures tokens are counted by."""

from __future__ import annotations

import pytest

from recommender.metrics.payload_lengths import (
    LengthBin,
    PayloadLengths,
    cost_per_million_tokens,
    input_tokens_per_second,
    length_histogram,
    payload_lengths,
)


def test_one_length_is_one_bin():
    assert length_histogram([7, 7, 7]) == (LengthBin(7, 7, 3),)


def test_bins_are_whole_tokens_of_equal_width_from_the_shortest_to_the_longest_empty_ones_kept():
    bins = length_histogram([3, 4, 10, 40], bins=4)  # 38 lengths over 4 bins: 10 tokens each
    assert [(b.low, b.high) for b in bins] == [(3, 12), (13, 22), (23, 32), (33, 42)]
    assert [b.requests for b in bins] == [3, 0, 0, 1]


def test_narrow_spreads_get_one_bin_per_length():
    assert [(b.low, b.high, b.requests) for b in length_histogram([5, 6, 6, 8])] == [
        (5, 5, 1),
        (6, 6, 2),
        (7, 7, 0),
        (8, 8, 1),
    ]


def test_the_figures_and_their_round_trip_through_the_store():
    lengths = payload_lengths("abc", "q.txt", [10, 20, 30, 100])
    assert (lengths.min_tokens, lengths.median_tokens, lengths.mean_tokens, lengths.max_tokens) == (10, 25.0, 40.0, 100)
    assert PayloadLengths.from_dict(lengths.to_dict()) == lengths
    assert PayloadLengths.from_dict(None) is None
    assert lengths.histogram_rows()[0] == ("10-15", 1, "25%")


def test_tokens_per_second_and_cost_per_million_tokens():
    assert input_tokens_per_second(600.0, 20.0) == pytest.approx(200.0)  # 10 requests/s x 20 tokens
    assert cost_per_million_tokens(25.0, 20.0) == pytest.approx(1.25)  # 25 USD per million inferences / 20 tokens
    assert input_tokens_per_second(None, 20.0) is None and input_tokens_per_second(600.0, None) is None
    assert cost_per_million_tokens(None, 20.0) is None and cost_per_million_tokens(25.0, None) is None
