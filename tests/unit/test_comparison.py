"""Typed comparisons and exclusions: the parts are data, the sentence is rendered from them."""

from recommender.candidates import RunStatus
from recommender.decide.comparison import TIED_TEXT, Comparison, MetricComparison, Outcome, Standing
from recommender.decide.exclusion import ExclusionKind
from recommender.decide.ranking import RankInput, exclusion_reasons
from recommender.metrics.limits import Limits


def test_claims_ties_and_missing_estimates_render_one_sentence() -> None:
    versus = Comparison(
        Standing.COMPARED,
        (
            MetricComparison("p99 latency", Outcome.LOWER, 0.333),
            MetricComparison("throughput", Outcome.TIED),
            MetricComparison("cost per million", Outcome.NO_ESTIMATE),
        ),
        repeats=2,
    )
    assert [m.label for m in versus.claims] == ["p99 latency"]
    assert versus.text == (
        "winner has 33.3% lower p99 latency; tied on throughput (intervals overlap); "
        "no noise estimate (repeats: 2) for cost per million"
    )
    assert versus.differences == versus.text.removeprefix("winner has ")


def test_without_claims_the_reason_is_given_without_a_sentence_to_parse() -> None:
    unknown = Comparison(Standing.COMPARED, (MetricComparison("throughput", Outcome.NO_ESTIMATE),), repeats=1)
    assert unknown.noise_only and not unknown.claims
    assert unknown.text == "no noise estimate (repeats: 1): no difference claimed"
    assert unknown.no_claim == "no noise estimate (repeats: 1)"
    assert Comparison(Standing.COMPARED).text == "same measured values as the winner"
    assert Comparison(Standing.TIED).text == TIED_TEXT
    assert str(Comparison(Standing.WINNER)) == "recommended"


def test_over_threshold_is_an_exclusion_not_a_status() -> None:
    item = RankInput(
        key="k",
        name="n",
        reason="over the limits",
        within_threshold=False,
        invocations_per_minute=10,
        model_latency_ms=10,
    )
    assert item.status is RunStatus.OK and item.status_text == "over threshold"
    (reason,) = exclusion_reasons(item, Limits())
    assert reason.kind is ExclusionKind.OVER_THRESHOLD and str(reason) == "over threshold: over the limits"


def test_a_run_that_is_not_ok_is_excluded_by_its_status() -> None:
    item = RankInput(key="k", name="n", status=RunStatus.PRUNED, invocations_per_minute=10, model_latency_ms=10)
    assert [(e.kind, e.text) for e in exclusion_reasons(item, Limits())] == [(ExclusionKind.STATUS, "status is pruned")]
