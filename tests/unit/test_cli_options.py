"""The CLI's shared options: --percentile offers exactly the vocabulary's percentiles."""

from recommender.cli.options import PercentileChoice
from recommender.vocabulary import PERCENTILE_NAMES


def test_percentile_choices_are_the_vocabularys_percentiles():
    assert [choice.value for choice in PercentileChoice] == list(PERCENTILE_NAMES)


def test_a_percentile_choice_is_its_name_as_a_string():
    assert PercentileChoice("p99") == "p99"
    assert PercentileChoice.p95.value == "p95"
