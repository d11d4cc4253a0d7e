"""One experiment file's root: model, payload, variants, target, traffic and the decision's limits."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from recommender.spec.base import NAME_PATTERN, Strict
from recommender.spec.decision import CapacitySpec, CorrectnessSpec, LatencyThreshold, Objectives
from recommender.spec.model import ModelSpec, PayloadSpec
from recommender.spec.search import SearchSpec
from recommender.spec.target import TargetSpec
from recommender.spec.traffic import TrafficSpec
from recommender.spec.variants import VariantGrid


class ExperimentSpec(Strict):
    """One experiment: a model, a payload, a grid of serving variants, a target and a traffic pattern."""

    name: str = Field(..., min_length=1, max_length=120, pattern=NAME_PATTERN, description="Experiment name (letters, digits, . _ -).")
    description: str = Field("", description="Free text shown in reports.")
    notes: list[str] = Field(default_factory=list, description="Remarks kept with the file (an import lists what it could not map); not used by runs.")
    model: ModelSpec = Field(default_factory=ModelSpec, description="The model to serve.")
    payload: PayloadSpec = Field(default_factory=PayloadSpec, description="The request payload.")
    variants: VariantGrid = Field(default_factory=VariantGrid, description="The serving-configuration grid.")
    target: TargetSpec = Field(default_factory=TargetSpec, description="Where to deploy.")
    traffic: TrafficSpec = Field(default_factory=TrafficSpec, description="The load pattern.")
    latency_threshold: LatencyThreshold = Field(default_factory=LatencyThreshold, description="The latency target.")
    max_error_rate: float = Field(0.01, ge=0, le=1, description="Largest acceptable share of failed requests.")
    objectives: Objectives = Field(default_factory=Objectives, description="Ranking importance of cost, latency, throughput.")
    capacity: CapacitySpec = Field(default_factory=CapacitySpec, description="Target load for instance counts and autoscaling.")
    search: SearchSpec = Field(default_factory=SearchSpec, description="grid (every candidate in full) or adaptive "
                               "(load search per candidate, racing, a seeded sampler for numeric ranges), with a budget.")
    correctness: CorrectnessSpec | Literal["off"] = Field(
        default_factory=CorrectnessSpec, description="Tolerances of the correctness gate ({atol, rtol, min_cosine, "
        "reference_outputs}), or `off` to disable it (every report then says correctness was not checked).")

    @field_validator("name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("correctness", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @model_validator(mode="after")
    def _ranges_need_adaptive(self) -> "ExperimentSpec":
        ranged = sorted(self.variants.ranged_axes())
        if ranged and not self.search.adaptive:
            raise ValueError(f"variants.{ranged[0]}: a {{range: [low, high]}} needs `search: adaptive` (the sampler "
                             f"searches ranges); grid search needs a list of values, e.g. [1, 2, 4]")
        return self
