"""Recommendation: pricing, ranking, sizing, autoscaling and the plain-words justification, on hand-computed figures."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from recommender.candidates import CandidateResult
from recommender.decide.recommendation import endpoint_name_for, recommend, resolve_pricing
from recommender.errors import CostError
from recommender.metrics.intervals import Interval
from recommender.spec import ExperimentSpec
from tests.unit.seeded_study import fixed_catalog, headline


def spec(**overrides: Any) -> ExperimentSpec:
    document = {
        "name": "hand",
        "target": {"price_per_hour": 1.0},
        "latency_threshold": {"percentile": "p95", "ms": 500},
        "capacity": {"target_invocations_per_minute": 30000, "autoscaling_headroom": 0.5},
    }
    for key, value in overrides.items():
        document[key] = {**document.get(key, {}), **value} if isinstance(value, dict) else value
    return ExperimentSpec.model_validate(document)


def result(
    name: str, ipm: float, p95: float, status: str = "ok", error_rate: float = 0.0, **extra: Any
) -> CandidateResult:
    line = dataclasses.replace(headline(ipm, p95, error_rate), **extra) if status == "ok" else None
    config = {
        "optimization": "pt",
        "dynamic_batching": None,
        "instance_count": 1,
        "max_batch_size": 8,
        "instance_type": "local-cpu",
        "model_fingerprint": "f",
    }
    return CandidateResult(
        f"k-{name}", name, config, status, None if status == "ok" else "it broke", line, None, 1, 1.0, None
    )


def interval(low: float, high: float) -> Interval:
    return Interval((low + high) / 2, low, high, 3)


@pytest.fixture
def pair() -> list[CandidateResult]:
    # A: 540/min at 38 ms; B: 400/min at 30 ms. Equal weights: A cost 1 + latency 0 + throughput 1 = 2/3, B 1/3.
    return [result("A", 540, 38), result("B", 400, 30)]


@pytest.mark.parametrize(
    ("overrides", "winner", "count", "fleet_usd", "per_million", "max_capacity"),
    [
        # 30000 / 540 = 55.6 -> 56 instances x 1 USD; per million 1 / (540 x 60) x 1e6; target 270 -> 30000 / 270 -> 112
        ({}, "A", 56, 56.0, 1 / 32_400 * 1e6, 112),
        # priced as ml.g4dn.xlarge at 0.7364 (wins over price_per_hour): 56 x 0.7364
        (
            {"target": {"price_per_hour": 5.0, "priced_as": "ml.g4dn.xlarge"}},
            "A",
            56,
            41.2384,
            0.7364 / 32_400 * 1e6,
            112,
        ),
        # latency only: B wins; 30000 / 400 = 75 instances; target 200 -> 150
        (
            {"objectives": {"cost": "lowest", "latency": "highest", "throughput": "lowest"}},
            "B",
            75,
            75.0,
            1 / 24_000 * 1e6,
            150,
        ),
        # 1000 per minute at 2.5 USD: ceil(1000 / 540) = 2 -> 5 USD/hour; target 270 -> ceil(1000 / 270) = 4
        (
            {"target": {"price_per_hour": 2.5}, "capacity": {"target_invocations_per_minute": 1000}},
            "A",
            2,
            5.0,
            2.5 / 32_400 * 1e6,
            4,
        ),
    ],
)
def test_winner_count_and_fleet_cost(pair, overrides, winner, count, fleet_usd, per_million, max_capacity) -> None:
    rec = recommend(pair, spec(**overrides), [fixed_catalog()])
    assert rec.winner.candidate.name == winner
    assert rec.fleet_size == count
    assert rec.capacity.cost_per_hour == pytest.approx(fleet_usd)
    assert rec.capacity.cost_per_million == pytest.approx(per_million)
    assert rec.capacity.cost_per_inference == pytest.approx(per_million / 1e6)
    assert (rec.scaling.min_capacity, rec.scaling.max_capacity) == (1, max_capacity)
    assert rec.fleets[f"k-{winner}"].fleet_size == count


def test_every_candidate_is_one_instance_at_the_catalog_price(pair) -> None:
    rec = recommend(pair, spec(target={"priced_as": "ml.g4dn.xlarge"}), [fixed_catalog()])
    assert {
        r.candidate.name: (r.candidate.priced_instances, r.candidate.cost_per_hour) for r in rec.ranking.ranked
    } == {"A": (1, 0.7364), "B": (1, 0.7364)}
    assert rec.fleets["k-B"].fleet_size == 75 and rec.fleets["k-B"].cost_per_hour == pytest.approx(75 * 0.7364)


def test_justification_says_what_why_and_by_how_much(pair) -> None:
    pair = [
        dataclasses.replace(
            r,
            headline=dataclasses.replace(
                r.headline,
                repeats=3,
                ipm_interval=interval(ipm * 0.99, ipm * 1.01),
                latency_interval=interval(ms * 0.99, ms * 1.01),
            ),
        )
        for r, ipm, ms in zip(pair, (540, 400), (38, 30), strict=False)
    ]
    rec = recommend(pair, spec(), [fixed_catalog()])
    text = rec.justification
    assert text.startswith("A sustains 540 invocations per minute per instance at p95 38.0 ms (threshold 500 ms)")
    # sized on the interval's lower bound 534.6: ceil(30000 / 534.6) = 57; 56 at the point estimate
    assert (
        "57 instances of local-cpu serve 30,000 per minute (sized on the interval lower bound (n=3 repeats); "
        "56 at the point estimate) at 57.00 USD/hour"
    ) in text
    assert "between 1 and 112 instances" in text  # autoscaling tracks MaxInvocations x headroom: 30000 / 270
    # relative to B: cost per million 1/540 vs 1/400 -> 25.9 % lower; latency 38 vs 30 -> 26.7 % higher; 35 % more
    # throughput
    assert (
        "It beats the next candidate, B, with 25.9% lower cost per million, 26.7% higher p95 latency, "
        "35.0% higher throughput" in text
    )
    assert rec.tie_notice is None


def test_unpriced_is_said_never_shown_as_free(pair) -> None:
    rec = recommend(pair, spec(target={"price_per_hour": 0.0}), [fixed_catalog()])
    assert not rec.pricing.priced and rec.capacity is None
    assert rec.fleet_size == 56  # sizing does not need a price
    assert all(f.cost_per_hour is None for f in rec.fleets.values())
    assert "the cost is unknown because local-cpu is unpriced (not free)" in rec.justification
    assert "USD" not in rec.justification
    assert any("unpriced (it is not free)" in note for note in rec.notes)
    # unpriced on one shared instance type: cost stays in the score on relative cost (issue 22 item 16), labelled
    assert any(note.startswith("cost ranked on relative cost") for note in rec.notes)
    assert rec.to_document()["capacity"] is None and rec.to_document()["ranked"][0]["fleet_cost_per_hour"] is None


@pytest.mark.parametrize(
    ("results", "reason"),
    [
        (
            [result("A", 540, 620), result("B", 400, 30, error_rate=0.2), result("C", 0, 0, status="failed")],
            "none of the 3 candidates was measured within p95 latency <= 500 ms and error rate <= 1.00%",
        ),
        ([], "the experiment has no candidates stored yet"),
    ],
)
def test_no_winner_says_why(results, reason) -> None:
    rec = recommend(results, spec(), [fixed_catalog()])
    assert rec.winner is None and rec.fleet_size is None and rec.capacity is None and rec.scaling is None
    assert reason in rec.no_winner_reason
    assert rec.justification.startswith("No recommendation: ")
    assert len(rec.ranking.excluded) == len(results)


def test_tie_makes_no_better_claim() -> None:
    tied = [
        result("A", 540, 38, ipm_interval=interval(500, 580), latency_interval=interval(35, 41)),
        result("B", 520, 39, ipm_interval=interval(490, 560), latency_interval=interval(36, 43)),
    ]
    rec = recommend(tied, spec(), [fixed_catalog()])
    assert rec.winner.candidate.name == "A"
    assert rec.ranking.ranked[1].tied_with_winner
    assert rec.tie_notice.startswith("B is indistinguishable from A at this noise level")
    assert (
        "The next candidate, B, is indistinguishable from it at this noise level, so no 'better' claim is made"
        in rec.justification
    )
    assert "beats" not in rec.justification and "lower cost" not in rec.justification


def test_intervals_and_stability_are_read_when_present_and_optional() -> None:
    rec = recommend(
        [result("A", 540, 38, ipm_interval=interval(500.0, 580.0), stable=False), result("B", 400, 30)],
        spec(),
        [fixed_catalog()],
    )
    inputs = {r.candidate.name: r.candidate for r in rec.ranking.ranked}
    assert inputs["A"].ipm_interval == (500.0, 580.0) and inputs["A"].latency_interval is None
    assert inputs["B"].ipm_interval is None
    assert rec.unstable == frozenset({"k-A"})
    assert any(note.startswith("unstable at the load level decided on") and note.endswith(": A") for note in rec.notes)


def test_a_candidate_that_breaches_below_the_level_decided_on_is_named_in_the_notes() -> None:
    """A grid's full ladder can meet the limits at a load after breaching them at lower ones (seen on vLLM's default
    at 16 users after 8 breached): ranked on the level decided on, named in the notes; a pruned probe is not."""
    dip = result("D", 540, 38, level_load=16.0, breached_below=(4.0, 8.0))
    probe = dataclasses.replace(result("P", 300, 40, breached_below=(1.0,)), status="pruned", reason="pruned by racing")
    rec = recommend([dip, result("B", 400, 30), probe], spec(), [fixed_catalog()])
    assert rec.winner.candidate.name == "D"
    notes = [note for note in rec.notes if note.startswith("met the limits at the load level decided on")]
    assert len(notes) == 1 and notes[0].endswith(": D (meets them at load 16, breaches them at load 4, 8)")
    plain = recommend([result("A", 540, 38), result("B", 400, 30)], spec(), [fixed_catalog()])
    assert not any(note.startswith("met the limits at the load level") for note in plain.notes)


def test_a_pruned_candidates_probe_is_not_reported_unstable_in_the_notes() -> None:
    """Adaptive search: a probe is one window or two, always too few for the stability rule; the pruned candidate is
    not ranked, so the note about the decision's stability does not name it."""
    probe = dataclasses.replace(result("P", 300, 40, stable=False), status="pruned", reason="pruned by racing: below")
    rec = recommend([result("A", 540, 38, stable=False), result("B", 400, 30), probe], spec(), [fixed_catalog()])
    notes = [note for note in rec.notes if note.startswith("unstable at the load level decided on")]
    assert len(notes) == 1 and notes[0].endswith(": A")


def test_pricing_sources() -> None:
    catalog = [fixed_catalog()]
    assert resolve_pricing(spec().target, catalog).price_per_hour == 1.0
    priced_as = resolve_pricing(spec(target={"priced_as": "ml.g4dn.xlarge"}).target, catalog)
    assert (priced_as.price_per_hour, priced_as.hardware.gpus, priced_as.measured_on) == (0.7364, 1, "local-cpu")
    with pytest.raises(CostError) as unknown:
        resolve_pricing(spec(target={"priced_as": "ml.g4dn.xlargee"}).target, catalog)
    assert "ml.g4dn.xlarge" in unknown.value.hint


@pytest.mark.parametrize(
    ("experiment", "candidate", "expected"),
    [
        ("seed_study.v2", "pt-db-ig2-mbs8", "seed-study-v2-pt-db-ig2-mbs8"),
        ("x" * 70, "pt", "x" * 63),
    ],
)
def test_endpoint_names_are_valid_sagemaker_names(experiment, candidate, expected) -> None:
    assert endpoint_name_for(experiment, candidate) == expected


def test_the_fleet_is_sized_on_the_interval_lower_bound_with_the_point_beside_it() -> None:
    # 30000 / 500 = 60 at the lower bound; 30000 / 540 = 55.6 -> 56 at the point
    rec = recommend([result("A", 540, 38, ipm_interval=interval(500, 580), repeats=3)], spec(), [fixed_catalog()])
    fleet = rec.fleets["k-A"]
    assert (rec.fleet_size, fleet.fleet_size_at_point, fleet.sized_on) == (60, 56, "interval lower bound (n=3 repeats)")
    assert rec.capacity.fleet_size == 60 and rec.capacity.fleet_size_at_point == 56
    assert rec.capacity.cost_per_million == pytest.approx(1 / 32_400 * 1e6)  # still at MaxInvocations, the point
    assert rec.to_document()["ranked"][0]["initial_instance_count_at_point"] == 56


def test_an_interval_reaching_zero_sizes_on_the_point_and_says_so() -> None:
    rec = recommend([result("A", 540, 38, ipm_interval=interval(-100, 1180))], spec(), [fixed_catalog()])
    assert rec.fleet_size == 56 and rec.fleets["k-A"].sized_on == "point estimate (the interval reaches 0)"


def test_one_repeat_claims_no_difference() -> None:
    rec = recommend([result("A", 540, 38), result("B", 400, 30)], spec(), [fixed_catalog()])
    assert rec.justification.endswith(
        "It ranks above the next candidate, B, on score (1.000 vs 0.741), but no "  # cost only: 400 / 540
        "difference between them is claimed: no noise estimate (repeats: 1)."
    )
    assert "%" not in rec.justification.split("It ranks above")[1]


def test_an_excluded_candidate_says_how_many_repeats_breached() -> None:
    over = result(
        "A",
        540,
        620,
        within_threshold=False,
        repeats=3,
        notes=(
            "no load level meets p95 <= 500 ms and error rate <= 1.0%: at load 1 (the lowest) p95 620.0 ms "
            "above the 500 ms threshold",
            "2 of 3 repeats breached at load 1 on their own",
        ),
    )
    rec = recommend([over, result("B", 400, 30)], spec(), [fixed_catalog()])
    (excluded,) = rec.ranking.excluded
    assert "2 of 3 repeats breached at load 1 on their own" in excluded.reasons[0]


def test_a_tie_says_what_separating_the_leaders_would_take() -> None:
    """#1 540 +-40 and #2 520 +-35 (throughput 20 apart): the intervals separate after about ((40 + 35) / 20)^2 =
    14.1 times the measurement each; latency (38 +-3 vs 39.5 +-3.5, 1.5 apart) would take 18.8: throughput first."""
    tied = [
        result("A", 540, 38, ipm_interval=interval(500, 580), latency_interval=interval(35, 41)),
        result("B", 520, 39, ipm_interval=interval(485, 555), latency_interval=interval(36, 43)),
    ]
    rec = recommend(tied, spec(), [fixed_catalog()])
    assert rec.tie_notice.endswith(
        "#1 and #2: separating them would take about 14.1 times this measurement each, if the 3.7% throughput "
        "difference holds"
    )
    same = [
        result("A", 540, 38, ipm_interval=interval(500, 580), latency_interval=interval(35, 41)),
        result("B", 540, 38, ipm_interval=interval(495, 585), latency_interval=interval(34, 42)),
    ]
    assert recommend(same, spec(), [fixed_catalog()]).tie_notice.endswith("measuring more cannot separate them")
    noisy = [
        result("A", 540, 38, ipm_interval=interval(300, 780), latency_interval=interval(20, 56)),
        result("B", 530, 38.5, ipm_interval=interval(310, 750), latency_interval=interval(21, 56)),
    ]
    assert "more than 20 times this measurement each" in recommend(noisy, spec(), [fixed_catalog()]).tie_notice
