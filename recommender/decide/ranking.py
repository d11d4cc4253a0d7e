"""Rank benchmarked candidates: constraints first, then weighted objectives, a Pareto front, and honest ties.

Pure functions over `RankInput` records (no store, no I/O).

1. Constraints. A candidate is excluded, with every reason in plain words, when its status is not
   'ok', it has no successful invocations, its latency at the chosen percentile is above the
   threshold (or missing), or its error rate is above the limit (metrics/limits.Limits: always given).
2. Objectives: cost per million inferences (lower is better), latency (lower), throughput in
   invocations per minute (higher). Each is normalised as a ratio to the best eligible value
   (best / value when lower is better, value / best when higher is better), so 1 is the best and a
   candidate with half the best throughput gets 0.5. Ratios keep proportions: min-max scaling would
   turn a 1 % latency edge into the full 0-to-1 range and let it outweigh a 5x throughput gap.
   The score is the weighted mean of the three normalised values.
3. Importance -> weight, SageMaker Studio's five levels mapped linearly:

       lowest 0, low 1, medium 2, high 3, highest 4

   then divided by their sum. 'lowest' therefore ignores that objective; all three 'lowest'
   means no preference and falls back to equal weights. Default (spec.decision.DEFAULT_IMPORTANCE): cost highest,
   latency and throughput lowest, i.e. the lowest cost per inference within the limits, as SageMaker Inference
   Recommender decides; where cost leaves the score (unknown prices on different instance types) the rest share
   its weight equally.
4. Pareto front over (cost per million down, latency down, throughput up).
5. Ties and claims. A candidate whose throughput interval and latency interval both overlap the
   winner's is flagged `tied_with_winner`: indistinguishable at this noise level. Against any
   candidate a difference ("X % higher throughput") is stated only for a metric whose intervals
   separate (cost per million from the throughput interval, the price being the same); a metric
   whose intervals overlap is "tied", one without an interval on either side has "no noise
   estimate (repeats: N)". A claim resting on window-to-window intervals says so.
6. Order: score descending, then name, then key (stable and deterministic).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from recommender.candidates import RunStatus
from recommender.decide.comparison import Comparison, MetricComparison, Outcome, Standing
from recommender.decide.cost import cost_per_million
from recommender.decide.exclusion import Exclusion, ExclusionKind
from recommender.errors import RankingError
from recommender.metrics.generation import GenerationFigures
from recommender.metrics.limits import Limits
from recommender.metrics.payload_lengths import input_tokens_per_second
from recommender.spec.decision import DEFAULT_IMPORTANCE

Bounds = tuple[float, float]

IMPORTANCE_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {"lowest": 0.0, "low": 1.0, "medium": 2.0, "high": 3.0, "highest": 4.0}
)
OBJECTIVES = ("cost", "latency", "throughput")


@dataclass(frozen=True)
class RankInput:
    """One benchmarked candidate, as ranking needs it."""

    key: str
    name: str
    status: RunStatus = RunStatus.OK
    reason: str | None = None
    within_threshold: bool = True  # the measurement's own verdict on its repeats (False: some were over the limits)
    invocations_per_minute: float | None = None
    ipm_interval: Bounds | None = None
    model_latency_ms: float | None = None  # at the chosen percentile, at MaxInvocations
    latency_interval: Bounds | None = None
    error_rate: float = 0.0  # fraction, 0.01 = 1 %
    cost_per_hour: float | None = None
    cost_per_million: float | None = None
    instance_type: str = ""
    priced_instances: int = 1  # instances cost_per_hour is the price of (one serving instance, as measured)
    config: dict[str, Any] = field(default_factory=dict)
    repeats: int = 1
    interval_label: str | None = None  # what the throughput interval rests on, e.g. "n=3 repeats"; None: none
    latency_interval_label: str | None = None  # what the latency interval rests on (its own n: windows may differ)
    window_noise: bool = False  # the intervals are window-to-window noise only (repeats < 3)
    samples: int = 0  # successful requests the latency percentile rests on (all repeats, the level's windows)
    served_on: str | None = None  # the measured hardware and backend of the run, in words (None: not recorded)
    gpu: str | None = None  # GPU figures at MaxInvocations or "no GPU (why)" (hardware.describe_gpu); None: unknown
    correctness: str | None = None  # what the correctness gate found, in one sentence (correctness/figures.py describe)
    budget_skipped: bool = False  # the budget refused or stopped it (CandidateResult.budget_skipped)
    mean_input_tokens: float | None = None  # the payload's mean input tokens per request (None: not recorded)
    generation: GenerationFigures | None = None  # a generative candidate's figures at its level (None: embeddings)

    @property
    def input_tokens_per_second(self) -> float | None:
        """Input tokens per second at MaxInvocations (metrics/payload_lengths.py)."""
        return input_tokens_per_second(self.invocations_per_minute, self.mean_input_tokens)

    @property
    def generative(self) -> bool:
        return self.generation is not None

    def generated(self, name: str) -> float | None:
        """A generation figure at the candidate's level by name (`output_tps`, `ttft_ms.p95`, ...); None: not known."""
        return self.generation.value(name) if self.generation is not None else None

    @property
    def total_tps(self) -> float | None:
        """Output + input tokens per second at the level (None when either is unknown)."""
        output, given = self.generated("output_tps"), self.generated("input_tps")
        return None if output is None or given is None else output + given

    @property
    def ipm(self) -> float:
        """MaxInvocations per minute; 0 when none was measured (such a candidate is excluded, never ranked)."""
        return self.invocations_per_minute or 0.0

    @property
    def over_threshold(self) -> bool:
        """Measured, but the measurement itself judged it over the limits."""
        return self.status == RunStatus.OK and not self.within_threshold

    @property
    def status_text(self) -> str:
        """The status as shown: the run's, or "over threshold" for a run over the limits by its own verdict."""
        return ExclusionKind.OVER_THRESHOLD.value if self.over_threshold else str(self.status)


@dataclass(frozen=True)
class Importance:
    cost: str = DEFAULT_IMPORTANCE["cost"]
    latency: str = DEFAULT_IMPORTANCE["latency"]
    throughput: str = DEFAULT_IMPORTANCE["throughput"]

    def weights(self) -> dict[str, float]:
        raw = {name: _level_weight(name, getattr(self, name)) for name in OBJECTIVES}
        total = sum(raw.values())
        if total == 0:
            return {name: 1 / len(OBJECTIVES) for name in OBJECTIVES}
        return {name: value / total for name, value in raw.items()}


@dataclass(frozen=True)
class RankedCandidate:
    candidate: RankInput
    rank: int
    score: float
    normalised: dict[str, float]
    cost_per_million: float | None
    pareto: bool
    tied_with_winner: bool
    versus: Comparison  # the winner against this candidate

    @property
    def comparison(self) -> str:
        return self.versus.text


@dataclass(frozen=True)
class Excluded:
    candidate: RankInput
    exclusions: tuple[Exclusion, ...]

    @property
    def reasons(self) -> tuple[str, ...]:
        """Every reason in plain words."""
        return tuple(e.text for e in self.exclusions)

    def has(self, kind: ExclusionKind) -> bool:
        return any(e.kind is kind for e in self.exclusions)


@dataclass(frozen=True)
class Ranking:
    ranked: tuple[RankedCandidate, ...]
    excluded: tuple[Excluded, ...]
    weights: dict[str, float]
    limits: Limits  # the constraints: latency percentile (the latencies' label) and threshold, error limit
    notes: tuple[str, ...] = ()
    cost_basis: str = "usd"  # what "cost" was ranked on: usd, relative (instance-hours, unpriced), or none

    @property
    def winner(self) -> RankedCandidate | None:
        return self.ranked[0] if self.ranked else None

    @property
    def tied(self) -> tuple[RankedCandidate, ...]:
        return tuple(r for r in self.ranked[1:] if r.tied_with_winner)


def rank(inputs: list[RankInput], limits: Limits, importance: Importance | None = None) -> Ranking:
    """Constraints (the decision's limits), then weighted ratio-to-best scores, Pareto front and ties."""
    weights = (importance or Importance()).weights()
    for item in inputs:
        _check_intervals(item)
    excluded, eligible = _apply_constraints(inputs, limits)
    costs = {item.key: _cost_per_million(item) for item in eligible}  # USD (None: unpriced)
    ranked_on, basis = _cost_basis(eligible, costs)
    metrics = {item.key: (ranked_on[item.key], item.model_latency_ms, item.invocations_per_minute) for item in eligible}
    metrics, weights, notes = _drop_incomplete(metrics, weights)
    if basis == "relative":
        notes.insert(0, RELATIVE_COST_NOTE)
    normalised = _normalise(eligible, metrics)
    scored = sorted(eligible, key=lambda item: (-_score(normalised[item.key], weights), item.name, item.key))
    front = _pareto_keys(eligible, metrics)
    ranked = _ranked(scored, normalised, weights, (costs, ranked_on, basis), front, limits)
    cost_basis = basis if weights["cost"] > 0 else "none"
    return Ranking(ranked, tuple(excluded), weights, limits, tuple(notes), cost_basis)


RELATIVE_COST_NOTE = (
    "cost ranked on relative cost: the candidates share one unpriced instance type, so the cost per inference is "
    "proportional to instance-hours per inference (1 / MaxInvocations); set a price for USD figures"
)
RELATIVE_COST_LABEL = "cost per million (relative: instance-hours)"


def _cost_basis(eligible: list[RankInput], costs: dict[str, float | None]) -> tuple[dict[str, float | None], str]:
    """What cost is ranked on: USD where every eligible candidate is priced; relative cost (instance-hours per
    million inferences) where none is but all share one instance type (the price, unknown, is the same for all,
    so it cancels in every ratio); else USD where known (cost then leaves the score, as before)."""
    if all(cost is not None for cost in costs.values()):
        return costs, "usd"
    shared = len({item.instance_type for item in eligible}) == 1 and all(c is None for c in costs.values())
    if shared and all(item.ipm > 0 for item in eligible):
        return {item.key: 1e6 / (item.ipm * 60) for item in eligible}, "relative"
    return costs, "usd"


# --- constraints --------------------------------------------------------------------------------


def exclusion_reasons(item: RankInput, limits: Limits) -> list[Exclusion]:
    """Every reason this candidate cannot be recommended; empty when eligible."""
    reasons = []
    if item.status != RunStatus.OK or item.over_threshold:
        kind = ExclusionKind.OVER_THRESHOLD if item.over_threshold else ExclusionKind.STATUS
        shown = item.status_text
        reasons.append(Exclusion(kind, f"{shown}: {item.reason}" if item.reason else f"status is {shown}"))
    if not item.invocations_per_minute or item.invocations_per_minute <= 0:
        reasons.append(Exclusion(ExclusionKind.NO_INVOCATIONS, "no successful invocations were measured"))
    if item.model_latency_ms is None:
        reasons.append(Exclusion(ExclusionKind.NO_LATENCY, f"no {limits.percentile} latency was measured"))
    elif item.model_latency_ms > limits.threshold_ms:
        latency, threshold = item.model_latency_ms, limits.threshold_ms
        text = f"{limits.percentile} latency {latency:g} ms is above the {threshold:g} ms threshold"
        reasons.append(Exclusion(ExclusionKind.LATENCY, text))
    if item.error_rate > limits.max_error_rate:
        text = f"error rate {item.error_rate:.2%} is above the {limits.max_error_rate:.2%} limit"
        reasons.append(Exclusion(ExclusionKind.ERROR_RATE, text))
    return reasons


def _apply_constraints(inputs: list[RankInput], limits: Limits) -> tuple[list[Excluded], list[RankInput]]:
    excluded, eligible = [], []
    for item in sorted(inputs, key=lambda i: (i.name, i.key)):
        reasons = exclusion_reasons(item, limits)
        if reasons:
            excluded.append(Excluded(item, tuple(reasons)))
        else:
            eligible.append(item)
    return excluded, eligible


# --- objectives -----------------------------------------------------------------------------------


def _level_weight(objective: str, level: str) -> float:
    if level not in IMPORTANCE_WEIGHTS:
        raise RankingError(
            f"unknown importance {level!r} for {objective}", hint=f"use one of: {', '.join(IMPORTANCE_WEIGHTS)}"
        )
    return IMPORTANCE_WEIGHTS[level]


def _drop_incomplete(metrics: dict[str, tuple], weights: dict[str, float]) -> tuple[dict, dict, list[str]]:
    """An objective some eligible candidate lacks (no price, no latency) is left out for all of them."""
    notes = []
    for index, name in enumerate(OBJECTIVES):
        if any(m[index] is None for m in metrics.values()):
            notes.append(
                f"{name} left out of the score and the Pareto front: "
                f"some eligible candidates have no {'price' if name == 'cost' else name} figure"
            )
            metrics = {key: (*m[:index], None, *m[index + 1 :]) for key, m in metrics.items()}
            weights = _without(name, weights)
    return metrics, weights, notes


def _without(objective: str, weights: dict[str, float]) -> dict[str, float]:
    rest = {name: w for name, w in weights.items() if name != objective}
    total = sum(rest.values())
    share = {name: (w / total if total else 1 / len(rest)) for name, w in rest.items()}
    return {name: share.get(name, 0.0) for name in OBJECTIVES}


def _cost_per_million(item: RankInput) -> float | None:
    if item.cost_per_million is not None:
        return item.cost_per_million
    if item.cost_per_hour is None or not item.invocations_per_minute:
        return None
    return cost_per_million(item.cost_per_hour, item.invocations_per_minute)


def _normalise(eligible: list[RankInput], metrics: dict[str, tuple]) -> dict[str, dict[str, float]]:
    lower_better = (True, True, False)
    result: dict[str, dict[str, float]] = {item.key: {} for item in eligible}
    for index, name in enumerate(OBJECTIVES):
        values = {key: m[index] for key, m in metrics.items() if m[index] is not None}
        best = (min if lower_better[index] else max)(values.values()) if values else None
        for key in result:
            result[key][name] = _ratio_to_best(values.get(key), best, lower_better[index])
    return result


def _ratio_to_best(value: float | None, best: float | None, lower_better: bool) -> float:
    """1.0 for the best value, proportionally less for the others (missing values count as best)."""
    if value is None or best is None or value == best:
        return 1.0
    if lower_better:
        return best / value if value > 0 else 1.0
    return value / best if best > 0 else 1.0


def _score(normalised: dict[str, float], weights: dict[str, float]) -> float:
    return sum(weights[name] * normalised[name] for name in OBJECTIVES)


def _pareto_keys(eligible: list[RankInput], metrics: dict[str, tuple]) -> set[str]:
    """Keys no other candidate dominates: no worse on every objective and better on one."""

    def oriented(key: str) -> tuple[float, ...]:
        cost, latency, ipm = metrics[key]
        return tuple(v for v in (cost, latency, -ipm if ipm is not None else None) if v is not None)

    points = {item.key: oriented(item.key) for item in eligible}
    return {
        key for key, p in points.items() if not any(_dominates(q, p) for other, q in points.items() if other != key)
    }


def _dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return (
        len(a) == len(b)
        and all(x <= y for x, y in zip(a, b, strict=False))
        and any(x < y for x, y in zip(a, b, strict=False))
    )


# --- ties and comparisons -------------------------------------------------------------------------


def _overlap(a: Bounds, b: Bounds) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def is_tied(candidate: RankInput, winner: RankInput) -> bool:
    """Throughput and latency intervals known on both sides and both overlapping: indistinguishable at this noise
    level (without intervals nothing is known either way: not tied, and no difference claimed)."""
    pairs = ((candidate.ipm_interval, winner.ipm_interval), (candidate.latency_interval, winner.latency_interval))
    return all(a is not None and b is not None and _overlap(a, b) for a, b in pairs)


def _ranked(
    scored: list[RankInput], normalised: dict, weights: dict, cost: tuple, front: set[str], limits: Limits
) -> tuple[RankedCandidate, ...]:
    """`cost`: (USD costs per million, the costs ranked on, their basis)."""
    if not scored:
        return ()
    costs, ranked_on, basis = cost
    winner = scored[0]
    out = []
    for position, item in enumerate(scored, start=1):
        tied = position > 1 and is_tied(item, winner)
        if position == 1:
            versus = Comparison(Standing.WINNER)
        elif tied:
            versus = Comparison(Standing.TIED)
        else:
            versus = _comparison(winner, item, ranked_on, limits.percentile, basis)
        out.append(
            RankedCandidate(
                candidate=item,
                rank=position,
                score=_score(normalised[item.key], weights),
                normalised=normalised[item.key],
                cost_per_million=costs[item.key],
                pareto=item.key in front,
                tied_with_winner=tied,
                versus=versus,
            )
        )
    return tuple(out)


def _comparison(winner: RankInput, other: RankInput, costs: dict, percentile: str, basis: str = "usd") -> Comparison:
    """How the winner differs from `other` (relative to `other`'s values), claimed only where the intervals separate."""
    metrics = []
    for label, mine, theirs, a, b in _metrics(winner, other, costs, percentile):
        label = RELATIVE_COST_LABEL if basis == "relative" and label == "cost per million" else label
        if mine is None or theirs is None or theirs == 0 or mine == theirs:
            continue
        relative = (theirs - mine) / mine if mine else None
        if a is None or b is None:
            metrics.append(MetricComparison(label, Outcome.NO_ESTIMATE, relative=relative))
        elif _overlap(a, b):
            metrics.append(MetricComparison(label, Outcome.TIED, relative=relative))
        else:
            delta = (mine - theirs) / theirs
            outcome = Outcome.HIGHER if delta > 0 else Outcome.LOWER
            metrics.append(MetricComparison(label, outcome, abs(delta), relative))
    return Comparison(
        Standing.COMPARED,
        tuple(metrics),
        repeats=min(winner.repeats, other.repeats),
        window_noise=winner.window_noise or other.window_noise,
    )


def _metrics(winner: RankInput, other: RankInput, costs: dict, percentile: str) -> list[tuple]:
    return [
        (
            "cost per million",
            costs[winner.key],
            costs[other.key],
            _cost_interval(winner, costs[winner.key]),
            _cost_interval(other, costs[other.key]),
        ),
        (
            f"{percentile} latency",
            winner.model_latency_ms,
            other.model_latency_ms,
            winner.latency_interval,
            other.latency_interval,
        ),
        (
            "throughput",
            winner.invocations_per_minute,
            other.invocations_per_minute,
            winner.ipm_interval,
            other.ipm_interval,
        ),
    ]


def _cost_interval(item: RankInput, cost: float | None) -> Bounds | None:
    """Cost per million scales as 1 / throughput at one price: its interval follows the throughput interval."""
    interval, ipm = item.ipm_interval, item.invocations_per_minute
    if cost is None or interval is None or not ipm or interval[0] <= 0:
        return None
    return cost * ipm / interval[1], cost * ipm / interval[0]


def _check_intervals(item: RankInput) -> None:
    for label, interval in (("ipm_interval", item.ipm_interval), ("latency_interval", item.latency_interval)):
        if interval is not None and interval[0] > interval[1]:
            raise RankingError(f"candidate {item.name}: {label} {interval} has its low end above its high end")
