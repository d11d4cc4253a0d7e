"""What a recommendation must respect and optimise: latency threshold, objectives, capacity, the correctness gate."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator

from recommender.spec.base import Strict
from recommender.vocabulary import DEFAULT_PERCENTILE, Percentile


class LatencyThreshold(Strict):
    """The latency a recommendation must respect."""

    percentile: Percentile = Field(DEFAULT_PERCENTILE, description="Which latency percentile is checked.")
    ms: float = Field(500, gt=0, description="Threshold in milliseconds.")


class SloSpec(Strict):
    """Service-level objectives of a generative endpoint (README "Definitions"): per request figure, a threshold in ms
    per percentile, e.g. `ttft_ms: {p95: 500}`. A load level meets them when each term's figure (the mean of its
    windows' percentiles) is within its threshold; goodput counts the requests whose own figures are within every
    threshold. They add to `latency_threshold` (the end-to-end term) and are decided at decision time."""

    ttft_ms: dict[Percentile, float] | None = Field(None, description="Time to first token, ms per percentile.")
    itl_ms: dict[Percentile, float] | None = Field(None, description="Inter-token latency, ms per percentile.")
    e2e_ms: dict[Percentile, float] | None = Field(None, description="End-to-end latency, ms per percentile.")

    @field_validator("ttft_ms", "itl_ms", "e2e_ms")
    @classmethod
    def _positive(cls, value: dict[str, float] | None) -> dict[str, float] | None:
        if value is not None and not value:
            raise ValueError("give at least one percentile and its threshold, e.g. {p95: 500}")
        for name, ms in (value or {}).items():
            if not ms > 0:
                raise ValueError(f"{name}: the threshold must be above 0 ms, got {ms!r}")
        return value

    def terms(self) -> list[tuple[str, str, float]]:
        """(metric, percentile, threshold ms) of every term, in the order ttft, itl, e2e."""
        given = (("ttft", self.ttft_ms), ("itl", self.itl_ms), ("e2e", self.e2e_ms))
        return [(metric, name, float(ms)) for metric, by in given for name, ms in (by or {}).items()]


ImportanceLevel = Literal["lowest", "low", "medium", "high", "highest"]


# the default decision, SageMaker Inference Recommender's: the lowest cost per inference within the limits
DEFAULT_IMPORTANCE: dict[str, ImportanceLevel] = {"cost": "highest", "latency": "lowest", "throughput": "lowest"}


class Objectives(Strict):
    """How much each objective matters when ranking (SageMaker Studio's importance levels). The default ranks on cost
    per inference alone (relative cost, instance-hours, where the candidates share one unpriced instance type); where
    cost is unknown (unpriced, different instance types) latency and throughput count equally."""

    cost: ImportanceLevel = Field(DEFAULT_IMPORTANCE["cost"], description="Cost per inference (lower is better).")
    latency: ImportanceLevel = Field(
        DEFAULT_IMPORTANCE["latency"], description="Latency at the threshold percentile (lower is better)."
    )
    throughput: ImportanceLevel = Field(
        DEFAULT_IMPORTANCE["throughput"], description="Invocations per minute per instance (higher is better)."
    )


class CapacitySpec(Strict):
    """The production load the recommendation is sized for."""

    target_invocations_per_minute: float = Field(
        30000,
        gt=0,
        description="Expected peak load; the initial instance count is ceil(target / MaxInvocations per instance).",
    )
    autoscaling_headroom: float = Field(
        0.5,
        gt=0,
        le=1,
        description="Target-tracking value = MaxInvocations per instance x headroom (AWS suggests 0.5 to start).",
    )
    target_output_tokens_per_second: float | None = Field(
        None,
        gt=0,
        description="A generative winner's peak load in output tokens per second: its deliverable's replicas are "
        "ceil(target / output tokens/s per instance) and its autoscaling is planned on output tokens/s; unset, they "
        "are sized on target_invocations_per_minute (requests within the SLOs).",
    )


class CorrectnessSpec(Strict):
    """The correctness gate (README "Correctness gate"): each candidate's outputs against the reference model's, after
    deployment and before the load. An element passes when |served - reference| <= atol + rtol x |reference|; an
    embedding also needs cosine similarity >= min_cosine. A candidate outside tolerance is `incorrect`: not loaded,
    never ranked, never exported. A tolerance left out takes the candidate precision's default."""

    atol: float | None = Field(
        None,
        ge=0,
        description="Absolute tolerance. Default fp32 1e-4 (served fp32 differs from "
        "eager PyTorch by ~1e-6: summation order only), fp16 1e-2 (about 3 significant digits).",
    )
    rtol: float | None = Field(
        None, ge=0, description="Relative tolerance (times |reference|). Default fp32 1e-3, fp16 1e-2."
    )
    min_cosine: float | None = Field(
        None,
        ge=-1,
        le=1,
        description="Lowest cosine similarity of an output row (an "
        "embedding) with the reference's. Default fp32 0.9999, fp16 0.999.",
    )
    generated_tokens: int = Field(
        16,
        ge=1,
        le=256,
        description="A generative candidate: how many greedy output tokens (temperature 0) of each gate prompt "
        "are compared with the reference's (transformers fp32 on the same weights); the tolerances per precision "
        'are correctness/tokens.py\'s table (README "Correctness gate") unless min_agreement or logprob_atol '
        "is given.",
    )
    min_agreement: float | None = Field(
        None,
        ge=0,
        le=1,
        description="A generative candidate: the least share of gate positions whose greedy token is the "
        "reference's (1: every free-running token equal, as fp32 must be). Default the precision's row of "
        'correctness/tokens.py\'s table (README "Correctness gate"): fp32 1, bf16 and fp16 0.9, q8 0.8, q4 0.6.',
    )
    logprob_atol: float | None = Field(
        None,
        ge=0,
        description="A generative candidate: the largest |served - reference| logprob of a reference token (teacher "
        "forced). Default the precision's row: fp32 1e-3, fp16 0.01, bf16 0.05, q8 0.2, q4 0.5.",
    )
    reference_outputs: Path | None = Field(
        None,
        description="A JSON file {case name: {output name: [[values per row]]}} "
        "of expected outputs, for an endpoint whose model is not available here "
        "(remote); only the cases it names are checked.",
    )


class DecisionSpec(Strict):
    """Deciding, not only measuring (issue 37 item 7): when #1 and the best candidate tied with it (#2) could be
    separated by measuring more, the job measures both more, paired and alternating on the same host (each round one
    further repeat of each one's level), until they separate, separating them is out of reach on this host's noise,
    or this budget is spent; it says what the extra time bought (decide/tiebreak.py)."""

    max_extra_seconds: float | None = Field(
        None,
        ge=0,
        description="Most seconds spent measuring the tied leaders more, over the experiment's stored runs. Default: "
        "a quarter of the time its candidates' measurements took, at most 300 s; 0 turns it off. A round starts only "
        "when its estimate (each one's deploy and one repeat, from its stored stage times) fits in what is left, and "
        "never after `time_budget_seconds`.",
    )


class TrackingSpec(Strict):
    """Where the results are also sent while the experiment runs."""

    mlflow: str | None = Field(
        None,
        description="MLflow tracking server URI (http://HOST:PORT): after each candidate, every candidate so far is "
        "logged as one MLflow run (as `recommender export EXP --mlflow URI` does; a second log updates the same "
        "runs). A server that cannot be reached is a note, never a failed candidate.",
    )

    @field_validator("mlflow")
    @classmethod
    def _http(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError(
                f"{value!r} is not an http(s) address: give the tracking server's, e.g. http://127.0.0.1:5000"
            )
        return value
