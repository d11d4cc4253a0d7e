"""The recommendation: an experiment's stored results, priced and ranked, sized for the target load, in plain words.

    results + spec + price catalog  ->  RankInputs  ->  rank()  ->  Recommendation

Every benchmarked endpoint is ONE serving instance (the Triton instance_group count is a setting inside
that instance, not an instance count), so a candidate's cost per hour is the price of one instance and
its invocations per minute per instance is the headline's MaxInvocations. The fleet is sized from the lower
bound of its 95 % interval when there is one (the point estimate's size beside it). The formulas
themselves live in cost.py (CostPerHour, CostPerInference, InitialInstanceCount), autoscaling.py
(target tracking) and ranking.py (constraints, scores, ties); this module only wires them together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from recommender.candidates import CandidateResult, RunStatus
from recommender.correctness.figures import describe as describe_correctness
from recommender.decide.autoscaling import ScalingPlan, plan_scaling
from recommender.decide.cost import (
    CapacityPlan,
    cost_per_hour,
    cost_per_million_tokens_at,
    fleet_cost_per_hour,
    initial_instance_count,
    plan_capacity,
)
from recommender.decide.cpu_precision import emulated_precision_notes
from recommender.decide.prices import Catalog, InstancePrice, find_price
from recommender.decide.ranking import Importance, RankedCandidate, Ranking, RankInput, rank
from recommender.decide.separation import to_separate
from recommender.decide.thread_cliff import cliff_notes
from recommender.decide.tiebreak import Extra
from recommender.errors import CostError
from recommender.hardware import describe_gpu, describe_served
from recommender.metrics.generation import GenerationFigures
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.levels import loads_text
from recommender.metrics.limits import Limits
from recommender.metrics.payload_lengths import PayloadLengths, cost_per_million_tokens
from recommender.metrics.stage_times import time_spent
from recommender.spec import ExperimentSpec, TargetSpec, target_label

UNPRICED_HINT = (
    "set target.price_per_hour (USD per instance-hour) or target.priced_as (a catalog instance type) "
    "in the experiment file"
)


@dataclass(frozen=True)
class Pricing:
    """What one serving instance costs, and where that figure came from. `price_per_hour` None = unpriced."""

    instance_type: str  # the type the price (and the hardware figures) belong to
    price_per_hour: float | None
    source: str
    hardware: InstancePrice | None = None
    measured_on: str = ""  # the hardware label the benchmark ran on (target.instance_type)
    unpriced_because: str | None = None  # why there is no price, in words (None when priced)

    @property
    def priced(self) -> bool:
        return self.price_per_hour is not None


@dataclass(frozen=True)
class Fleet:
    """A candidate sized for the target load: instances needed and, when priced, what they cost per hour."""

    fleet_size: int  # InitialInstanceCount, from the MaxInvocations interval's lower bound when there is one
    cost_per_hour: float | None
    fleet_size_at_point: int | None = None  # the same from the point estimate (shown beside it)
    sized_on: str = "point estimate"  # "interval lower bound (n=3 repeats)" or "point estimate (no interval)"
    on_interval: bool = False  # sized on the interval's lower bound (not the point estimate)


@dataclass(frozen=True)
class Recommendation:
    """Which configuration to deploy, how many instances, what it costs, and why, in plain words."""

    experiment: str
    description: str
    ranking: Ranking
    pricing: Pricing
    percentile: str
    threshold_ms: float
    max_error_rate: float
    target_ipm: float
    fleets: Mapping[str, Fleet]  # by candidate key, for every ranked candidate
    capacity: CapacityPlan | None  # the winner's, when priced
    fleet_size: int | None  # the winner's InitialInstanceCount
    scaling: ScalingPlan | None
    no_winner_reason: str | None
    tie_notice: str | None
    justification: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    unstable: frozenset[str] = frozenset()  # keys of candidates whose headline says stable: false
    candidate_pricing: Mapping[str, Pricing] = field(default_factory=dict)  # by key: each candidate's target's pricing
    time_spent: Mapping[str, float] = field(default_factory=dict)  # seconds per stage over the stored runs
    payload: PayloadLengths | None = None  # what the runs were sent (the newest run's record; None: not recorded)

    def pricing_of(self, key: str) -> Pricing:
        """A candidate's pricing (its target's; `pricing`, the winner's, when not known)."""
        return self.candidate_pricing.get(key, self.pricing)

    @property
    def winner(self) -> RankedCandidate | None:
        return self.ranking.winner

    def to_document(self) -> dict[str, Any]:
        """Plain data for --json and other programs: the ranking, the excluded candidates, the decision."""
        return {
            "experiment": self.experiment,
            "percentile": self.percentile,
            "threshold_ms": self.threshold_ms,
            "max_error_rate": self.max_error_rate,
            "target_invocations_per_minute": self.target_ipm,
            "pricing": {
                "instance_type": self.pricing.instance_type,
                "price_per_hour": self.pricing.price_per_hour,
                "priced": self.pricing.priced,
                "source": self.pricing.source,
            },
            "weights": dict(self.ranking.weights),
            "recommended": self.winner.candidate.name if self.winner else None,
            "no_winner_reason": self.no_winner_reason,
            "instance_count": self.fleet_size,
            "capacity": self.capacity.to_dict() if self.capacity else None,
            "autoscaling": _scaling_document(self.scaling),
            "tie_notice": self.tie_notice,
            "justification": self.justification,
            "notes": list(self.notes),
            "payload": self.payload.to_dict() if self.payload else None,
            "ranked": [_ranked_document(r, self.fleets[r.candidate.key]) for r in self.ranking.ranked],
            "excluded": [
                {
                    "name": e.candidate.name,
                    "key": e.candidate.key,
                    "status": e.candidate.status_text,
                    "reasons": list(e.reasons),
                }
                for e in self.ranking.excluded
            ],
        }

    def candidate_at(self, position: int) -> RankedCandidate | None:
        """The candidate ranked `position` (1 = the winner), or None when out of range."""
        return self.ranking.ranked[position - 1] if 1 <= position <= len(self.ranking.ranked) else None


def _ranked_document(r: RankedCandidate, fleet: Fleet) -> dict[str, Any]:
    c = r.candidate
    return {
        "rank": r.rank,
        "name": c.name,
        "key": c.key,
        "score": r.score,
        "invocations_per_minute": c.invocations_per_minute,
        "ipm_interval": c.ipm_interval,
        "latency_interval": c.latency_interval,
        "interval": c.interval_label,
        "latency_interval_n": c.latency_interval_label,
        "latency_samples": c.samples,
        "latency_ms": c.model_latency_ms,
        "error_rate": c.error_rate,
        "cost_per_million": r.cost_per_million,
        "input_tokens_per_second": c.input_tokens_per_second,
        "cost_per_million_tokens": cost_per_million_tokens(r.cost_per_million, c.mean_input_tokens),
        **_generation_document(c),
        "initial_instance_count": fleet.fleet_size,
        "initial_instance_count_at_point": fleet.fleet_size_at_point,
        "sized_on": fleet.sized_on,
        "fleet_cost_per_hour": fleet.cost_per_hour,
        "pareto": r.pareto,
        "tied_with_winner": r.tied_with_winner,
        "comparison": r.comparison,
        "config": c.config,
    }


def _generation_document(c: RankInput) -> dict[str, Any]:
    """A generative candidate's figures at its level (each with its interval) and its cost per million tokens."""
    if c.generation is None:
        return {}
    return {
        "generation": c.generation.to_dict(),
        "cost_per_million_output_tokens": cost_per_million_tokens_at(c.cost_per_hour, c.generated("output_tps")),
        "cost_per_million_total_tokens": cost_per_million_tokens_at(c.cost_per_hour, c.total_tps),
    }


def _scaling_document(plan: ScalingPlan | None) -> dict[str, Any] | None:
    if plan is None:
        return None
    return {
        "min_capacity": plan.min_capacity,
        "max_capacity": plan.max_capacity,
        "target_value": plan.target_value,
        "headroom": plan.headroom,
        "register_scalable_target": plan.register_scalable_target_request(),
        "put_scaling_policy": plan.put_scaling_policy_request(),
    }


# --- pricing --------------------------------------------------------------------------------------


def resolve_pricing(target: TargetSpec, catalogs: Iterable[Catalog] | None = None) -> Pricing:
    """priced_as (catalog price in target.region) when set, else price_per_hour when above 0, else unpriced."""
    catalogs = list(catalogs) if catalogs is not None else None
    if target.priced_as:
        entry, catalog = find_price(target.priced_as, target.region, catalogs)
        source = f"{catalog.source.strip()} (retrieved {catalog.retrieved})"
        return Pricing(
            target.priced_as,
            entry.usd_per_hour,
            f"catalog price of {target.priced_as} in {target.region}: {source}",
            entry,
            target.instance_type,
        )
    hardware = _hardware_of(target.instance_type, target.region, catalogs)
    if target.price_per_hour > 0:
        return Pricing(
            target.instance_type,
            target.price_per_hour,
            "target.price_per_hour in the experiment file",
            hardware,
            target.instance_type,
        )
    return _unpriced(target.instance_type, UNPRICED_HINT, hardware, target.instance_type)


def candidate_pricing(
    spec: ExperimentSpec, results: list[CandidateResult], catalogs: Iterable[Catalog] | None = None
) -> dict[str, Pricing]:
    """Each result's pricing by key: its target's (candidates carry their target's label; a single-target
    experiment's carry none). A candidate of a target no longer in the file is unpriced."""
    catalogs = list(catalogs) if catalogs is not None else None
    by_label = {(target_label(t) if spec.multi_target else ""): resolve_pricing(t, catalogs) for t in spec.all_targets}
    return {
        r.key: by_label.get(r.config.get("target", ""))
        or _unpriced(r.config.get("instance_type", "?"), "its target is no longer in the experiment file")
        for r in results
    }


def _unpriced(
    instance_type: str, because: str, hardware: InstancePrice | None = None, measured_on: str = ""
) -> Pricing:
    return Pricing(instance_type, None, "unpriced: " + because, hardware, measured_on, unpriced_because=because)


def _hardware_of(instance_type: str, region: str, catalogs: list[Catalog] | None) -> InstancePrice | None:
    try:
        return find_price(instance_type, region, catalogs)[0]
    except CostError:
        return None  # a local label such as local-cpu is not a catalog type


# --- rank inputs ----------------------------------------------------------------------------------


def rank_input(result: CandidateResult, percentile: str, pricing: Pricing) -> RankInput:
    """One stored candidate as ranking needs it (a candidate without a headline has no figures)."""
    h = result.headline
    hourly = cost_per_hour(pricing.price_per_hour, 1) if pricing.price_per_hour is not None else None
    within = h is None or h.within_threshold  # the measurement's verdict (some repeats over)
    over = result.status == RunStatus.OK and not within
    return RankInput(
        key=result.key,
        name=result.name,
        status=result.status,
        reason=("; ".join(h.notes) or None) if over and h is not None else result.reason,
        within_threshold=within,
        cost_per_hour=hourly,
        instance_type=pricing.instance_type,
        priced_instances=1,
        config=dict(result.config),
        served_on=describe_served(result.hardware, result.backend),
        gpu=describe_gpu(result.server_stats),
        correctness=describe_correctness(result.correctness),
        budget_skipped=result.budget_skipped,
        **({"mean_input_tokens": _mean_tokens(result.payload)} | (_figures(h, percentile) if h is not None else {})),
    )


def _mean_tokens(payload: dict[str, Any] | None) -> float | None:
    lengths = PayloadLengths.from_dict(payload)
    return lengths.mean_tokens if lengths is not None else None


def _figures(h: Headline, percentile: str) -> dict[str, Any]:
    """The measured figures a RankInput takes from a headline, at the decision's percentile; a generative one is
    ranked, sized and scaled on its goodput (requests/s within every SLO, x 60: the generative MaxInvocations)."""
    if h.generation is not None:
        return _figures(replace(h, generation=None), percentile) | _goodput(h.generation)
    interval = h.ipm_interval or h.latency_interval
    return {
        "invocations_per_minute": h.invocations_per_minute,
        "ipm_interval": _bounds(h.ipm_interval),
        "model_latency_ms": h.latency(percentile),
        "latency_interval": _bounds(h.latency_interval),
        "error_rate": h.error_rate,
        "repeats": h.repeats,
        "interval_label": interval.label if interval else None,
        "latency_interval_label": h.latency_interval.label if h.latency_interval else None,
        "window_noise": interval is not None and interval.counts == "windows",
        "samples": h.samples,
    }


def _goodput(generation: GenerationFigures) -> dict[str, Any]:
    """A generative candidate's throughput figures: goodput per minute and its interval, the generation figures."""
    goodput, interval = generation.value("goodput"), generation.interval("goodput")
    per_minute = None if interval is None else replace(interval, low=interval.low * 60, high=interval.high * 60)
    return {
        "invocations_per_minute": None if goodput is None else goodput * 60,
        "ipm_interval": _bounds(per_minute),
        "generation": generation,
        "mean_input_tokens": None,  # an embeddings payload's figure; a generation's tokens are in its figures
    }


def _bounds(interval: Interval | None) -> tuple[float, float] | None:
    return None if interval is None else (float(interval.low), float(interval.high))


def _unstable(result: CandidateResult) -> bool:
    """The measurement judged the steady-state windows and they disagreed (not judged is not unstable)."""
    return result.headline is not None and result.headline.stable is False


def _unstable_text(result: CandidateResult) -> str:
    stability = result.headline.stability if result.headline else None
    return f"{result.name} ({stability.reason})" if stability and stability.reason else result.name


def _dip_text(result: CandidateResult) -> str | None:
    """A ranked candidate as the note names it, "name (meets them at load X, breaches them at load Y)", when the level
    decided on meets the limits and a lower level measured does not (metrics/levels.breached_below); else None."""
    h = result.headline
    if h is None or not h.within_threshold or not h.breached_below or result.status == RunStatus.PRUNED:
        return None
    at = f"{h.level_load:g}" if h.level_load is not None else "the level decided on"
    return f"{result.name} (meets them at load {at}, breaches them at load {loads_text(h.breached_below)})"


def importance_of(spec: ExperimentSpec) -> Importance:
    objectives = spec.objectives
    return Importance(cost=objectives.cost, latency=objectives.latency, throughput=objectives.throughput)


# --- the recommendation ---------------------------------------------------------------------------


def recommend(
    results: list[CandidateResult],
    spec: ExperimentSpec,
    catalogs: Iterable[Catalog] | None = None,
    endpoint_name: str | None = None,
) -> Recommendation:
    """Price, rank and size the stored results of one experiment; each candidate is priced as its own target."""
    pricing_of = candidate_pricing(spec, results, catalogs)
    percentile = spec.latency_threshold.percentile
    ranking = rank(
        [rank_input(r, percentile, pricing_of[r.key]) for r in results], Limits.from_spec(spec), importance_of(spec)
    )
    target = spec.capacity.target_invocations_per_minute
    fleets = {r.candidate.key: _fleet(r.candidate, pricing_of[r.candidate.key], target) for r in ranking.ranked}
    winner = ranking.winner
    pricing = pricing_of[winner.candidate.key] if winner is not None else resolve_pricing(spec.target, catalogs)
    capacity = scaling = count = None
    if winner is not None:
        ipm, sizing, price = winner.candidate.ipm, sizing_ipm(winner.candidate), pricing.price_per_hour
        count = fleets[winner.candidate.key].fleet_size
        capacity = plan_capacity(pricing.instance_type, price, ipm, target, sizing) if price is not None else None
        scaling = plan_scaling(
            endpoint_name or endpoint_name_for(spec.name, winner.candidate.name),
            ipm,
            target,
            headroom=spec.capacity.autoscaling_headroom,
        )  # headroom is its margin
    draft = Recommendation(
        experiment=spec.name,
        description=spec.description,
        ranking=ranking,
        pricing=pricing,
        percentile=percentile,
        threshold_ms=spec.latency_threshold.ms,
        max_error_rate=spec.max_error_rate,
        target_ipm=target,
        fleets=fleets,
        capacity=capacity,
        fleet_size=count,
        scaling=scaling,
        no_winner_reason=None if winner else no_winner_reason(ranking, len(results)),
        tie_notice=tie_notice(ranking),
        justification="",
        notes=_notes(ranking, pricing, results),
        unstable=frozenset(r.key for r in results if _unstable(r)),
        candidate_pricing=pricing_of,
        time_spent=time_spent(r.server.stages for r in results),
        payload=payload_of(results),
    )
    return _with_justification(draft)


def payload_of(results: Iterable[CandidateResult]) -> PayloadLengths | None:
    """The payload the experiment's runs were sent: the newest run's record (the runs of one measurement protocol
    share the payload: its fingerprint is in the key); None when no run recorded one (stored before migration 0008)."""
    recorded = [r for r in results if r.payload and r.run_id is not None]
    newest = max(recorded, key=lambda r: r.run_id or 0, default=None)
    return PayloadLengths.from_dict(newest.payload) if newest is not None else None


def sizing_ipm(candidate: RankInput) -> float:
    """What a fleet is sized on: the lower bound of the MaxInvocations interval when it is above 0, else the point."""
    interval = candidate.ipm_interval
    return interval[0] if interval is not None and interval[0] > 0 else candidate.ipm


def _fleet(candidate: RankInput, pricing: Pricing, target_ipm: float) -> Fleet:
    ipm, sizing, price = candidate.ipm, sizing_ipm(candidate), pricing.price_per_hour
    hourly = fleet_cost_per_hour(price, target_ipm, sizing) if price is not None else None
    return Fleet(
        initial_instance_count(target_ipm, sizing),
        hourly,
        initial_instance_count(target_ipm, ipm),
        _sized_on(candidate),
        on_interval=candidate.ipm_interval is not None and candidate.ipm_interval[0] > 0,
    )


def _sized_on(candidate: RankInput) -> str:
    interval = candidate.ipm_interval
    if interval is None:
        return "point estimate (no interval)"
    if interval[0] <= 0:
        return "point estimate (the interval reaches 0)"
    return f"interval lower bound ({candidate.interval_label})"


def endpoint_name_for(experiment: str, candidate: str) -> str:
    """A valid SageMaker endpoint name (letters, digits, hyphens; at most 63) from the experiment and candidate
    names."""
    text = re.sub(r"[^A-Za-z0-9]+", "-", f"{experiment}-{candidate}").strip("-")
    return re.sub(r"-+", "-", text)[:63].rstrip("-") or "recommender-endpoint"


def no_winner_reason(ranking: Ranking, total: int) -> str:
    if total == 0:
        return "the experiment has no candidates stored yet; run it with `recommender run FILE`"
    c = ranking.limits
    limits = f"{c.percentile} latency <= {c.threshold_ms:g} ms and error rate <= {c.max_error_rate:.2%}"
    return (
        f"none of the {total} candidates was measured within {limits}; "
        "each one's reasons are listed under excluded candidates"
    )


def tie_notice(ranking: Ranking) -> str | None:
    tied = ranking.tied
    if not tied or ranking.winner is None:
        return None
    names = ", ".join(r.candidate.name for r in tied)
    verb = "is" if len(tied) == 1 else "are"
    notice = (
        f"{names} {verb} indistinguishable from {ranking.winner.candidate.name} at this noise level "
        f"(throughput and latency intervals overlap): the order between them is not significant, "
        f"so no 'better' claim is made; choose among them on other grounds"
    )
    separation = to_separate(ranking.winner.candidate, tied[0].candidate)
    return notice if separation is None else f"{notice}. #1 and #2: {separation.text}"


def _notes(ranking: Ranking, pricing: Pricing, results: list[CandidateResult]) -> tuple[str, ...]:
    notes = list(ranking.notes)
    leaders = {r.candidate.key for r in ranking.ranked[:2]}
    bought = next((e.outcome for r in results if r.key in leaders and (e := Extra.of(r.server_stats)).outcome), None)
    if bought is not None:  # the job measured the tied leaders more (job/tiebreak.py), under the experiment's limits
        notes.append(f"measured more to decide: {bought}")
    if not pricing.priced:
        notes.append(
            f"costs are not shown because {pricing.instance_type} is unpriced (it is not free): {UNPRICED_HINT}"
        )
    if pricing.priced and pricing.measured_on != pricing.instance_type:
        notes.append(
            f"measured on {pricing.measured_on}, priced as {pricing.instance_type}: the cost figures assume "
            f"{pricing.instance_type} serves as fast as the measured hardware"
        )
    # a pruned candidate is not ranked, and its probe is too short for the stability rule by design
    unstable = sorted(_unstable_text(r) for r in results if _unstable(r) and r.status != RunStatus.PRUNED)
    if unstable:
        notes.append(
            f'unstable at the load level decided on (the stability rule, README "Definitions"): {"; ".join(unstable)}'
        )
    dipped = sorted(text for r in results if (text := _dip_text(r)) is not None)
    if dipped:
        notes.append(
            "met the limits at the load level decided on but not at every lower level measured (the load axis is not "
            'monotone for it: traffic below that load can breach the limits; README "Definitions", MaxInvocations): '
            + "; ".join(dipped)
        )
    notes += cliff_notes(results)  # llama.cpp candidates with more threads than the host can give
    notes += emulated_precision_notes(results)  # vLLM at a 16-bit type its CPU does not compute natively
    return tuple(notes)


# --- justification --------------------------------------------------------------------------------


def _with_justification(draft: Recommendation) -> Recommendation:
    return replace(draft, justification=justify(draft))


def justify(rec: Recommendation) -> str:
    """The recommendation in plain words: what it sustains, how many instances, what they cost, why it wins."""
    winner = rec.winner
    if winner is None:
        return f"No recommendation: {rec.no_winner_reason}."
    c = winner.candidate
    sustains = (
        f"a goodput of {_count(c.ipm)} requests per minute per instance within the SLO ({c.ipm / 60:,.2f}/s)"
        if c.generative
        else f"{_count(c.ipm)} invocations per minute per instance"
    )
    sentences = [
        f"{c.name} sustains {sustains} at "
        f"{rec.percentile} {_ms(c.model_latency_ms)} ms (threshold {rec.threshold_ms:g} ms) with "
        f"{c.error_rate:.2%} errors",
        _sizing_sentence(rec, winner),
        _scaling_sentence(rec),
        _versus_sentence(rec),
    ]
    return ". ".join(s for s in sentences if s) + "."


def _sizing_sentence(rec: Recommendation, winner: RankedCandidate) -> str:
    fleet = rec.fleets[winner.candidate.key]
    served = (
        f"{rec.fleet_size} instance{'s' if rec.fleet_size != 1 else ''} of {rec.pricing.instance_type} "
        f"serve{'s' if rec.fleet_size == 1 else ''} {_count(rec.target_ipm)} per minute"
    )
    if fleet.on_interval:
        served += f" (sized on the {fleet.sized_on}; {fleet.fleet_size_at_point} at the point estimate)"
    if rec.capacity is None:
        return f"{served}; the cost is unknown because {rec.pricing.instance_type} is unpriced (not free)"
    plan = rec.capacity
    return (
        f"{served} at {plan.cost_per_hour:,.2f} USD/hour ({plan.cost_per_million:,.4f} USD per million inferences, "
        f"{plan.cost_per_inference:.3e} USD per inference)"
    )


def _scaling_sentence(rec: Recommendation) -> str:
    plan = rec.scaling
    if plan is None:
        return ""
    return (
        f"With autoscaling at {plan.headroom:.0%} of MaxInvocations ({plan.target_value:,.0f} invocations per "
        f"instance per minute) the variant scales between {plan.min_capacity} and {plan.max_capacity} instances"
    )


def _versus_sentence(rec: Recommendation) -> str:
    ranked = rec.ranking.ranked
    if len(ranked) == 1:
        return "It is the only candidate within the limits"
    runner_up = ranked[1]
    if runner_up.tied_with_winner:
        return (
            f"The next candidate, {runner_up.candidate.name}, is indistinguishable from it at this noise level, "
            f"so no 'better' claim is made"
        )
    scores = f"{ranked[0].score:.3f} vs {runner_up.score:.3f}"
    if runner_up.versus.claims:
        versus = runner_up.versus.differences
        return f"It beats the next candidate, {runner_up.candidate.name}, with {versus} (score {scores})"
    why = runner_up.versus.no_claim
    return (
        f"It ranks above the next candidate, {runner_up.candidate.name}, on score ({scores}), but no difference "
        f"between them is claimed: {why}"
    )


def _count(value: float) -> str:
    return f"{value:,.0f}"


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.1f}"
