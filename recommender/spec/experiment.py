"""One experiment file's root: model, payload, variants, target(s), traffic, scheduling and the decision's limits.

`target:` (one) or `targets:` (a list, e.g. three instance types to compare); candidates are variants x targets.
`spec.all_targets` is always the list; `spec.target` is the first (the only one of a single-target file).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from recommender.spec.base import NAME_PATTERN, Strict
from recommender.spec.decision import (
    CapacitySpec,
    CorrectnessSpec,
    DecisionSpec,
    LatencyThreshold,
    Objectives,
    SloSpec,
    TrackingSpec,
)
from recommender.spec.model import DEFAULT_TEXTS, ModelSpec, PayloadSpec
from recommender.spec.search import SearchSpec
from recommender.spec.target import LLAMA_SERVERS, TargetSpec, target_label
from recommender.spec.traffic import TrafficSpec, UntilKnown
from recommender.spec.variants import VariantGrid

MAX_TARGETS = 50


class ExperimentSpec(Strict):
    """One experiment: a model, a payload, a grid of serving variants, a target and a traffic pattern."""

    name: str = Field(
        ..., min_length=1, max_length=120, pattern=NAME_PATTERN, description="Experiment name (letters, digits, . _ -)."
    )
    description: str = Field("", description="Free text shown in reports.")
    notes: list[str] = Field(
        default_factory=list,
        description="Remarks kept with the file (an import lists what it could not map); not used by runs.",
    )
    model: ModelSpec = Field(default_factory=ModelSpec, description="The model to serve.")
    payload: PayloadSpec = Field(default_factory=PayloadSpec, description="The request payload.")
    variants: VariantGrid = Field(default_factory=VariantGrid, description="The serving-configuration grid.")
    target: TargetSpec = Field(
        default_factory=TargetSpec, description="Where to deploy (one target; see `targets` for several)."
    )
    targets: list[TargetSpec] | None = Field(
        None,
        min_length=1,
        max_length=MAX_TARGETS,
        description="Several targets (instance types, hosts) to compare: every "
        "variant runs on each; give either `target` or `targets`. Targets are told apart by `name` "
        "(default: instance_type).",
    )
    max_parallel: int = Field(
        1,
        ge=1,
        le=64,
        description="Candidates measured at the same time (SageMaker's MaxParallelOfTests): SageMaker "
        "endpoints and different remote hosts run concurrently, a local or docker GPU host one candidate per GPU; "
        "local CPU candidates always run one at a time (two servers on the same cores would measure each other).",
    )
    max_candidates: int | None = Field(
        None,
        ge=1,
        description="Measure at most this many candidates (SageMaker's MaxNumberOfTests), the first in grid "
        "order; the rest are recorded skipped with the reason.",
    )
    time_budget_seconds: float | None = Field(
        None,
        gt=0,
        description="Wall-clock limit of one run (SageMaker's JobDurationInSeconds): no candidate starts after "
        "it; running ones finish, the rest are recorded skipped with the reason.",
    )
    traffic: TrafficSpec = Field(default_factory=TrafficSpec, description="The load pattern.")
    latency_threshold: LatencyThreshold = Field(default_factory=LatencyThreshold, description="The latency target.")
    max_error_rate: float = Field(0.01, ge=0, le=1, description="Largest acceptable share of failed requests.")
    slo: SloSpec | None = Field(
        None, description="Generative endpoints: SLO terms on TTFT, inter-token and end-to-end latency (ms)."
    )
    objectives: Objectives = Field(
        default_factory=Objectives, description="Ranking importance of cost, latency, throughput."
    )
    capacity: CapacitySpec = Field(
        default_factory=CapacitySpec, description="Target load for instance counts and autoscaling."
    )
    decision: DecisionSpec = Field(
        default_factory=DecisionSpec,
        description="When #1 and #2 are tied: how long the job may measure them more to decide ({max_extra_seconds}).",
    )
    search: SearchSpec = Field(
        default_factory=SearchSpec,
        description="grid (every candidate in full) or adaptive "
        "(load search per candidate, racing, a seeded sampler for numeric ranges), with a budget.",
    )
    tracking: TrackingSpec = Field(
        default_factory=TrackingSpec, description="Where results are also sent while running (MLflow)."
    )
    correctness: CorrectnessSpec | Literal["off"] = Field(
        default_factory=CorrectnessSpec,
        description="Tolerances of the correctness gate ({atol, rtol, min_cosine, "
        "reference_outputs}), or `off` to disable it (every report then says correctness was not checked).",
    )

    @model_validator(mode="after")
    def _one_target_field(self) -> ExperimentSpec:
        if self.targets is None:
            return self
        if "target" in self.model_fields_set:
            raise ValueError(
                "give either `target:` (one) or `targets:` (a list), not both: move the target into the targets list"
            )
        labels = [target_label(t) for t in self.targets]
        repeated = sorted({label for label in labels if labels.count(label) > 1})
        if repeated:
            raise ValueError(f"targets {', '.join(repeated)} appear more than once: give each a distinct `name`")
        object.__setattr__(self, "target", self.targets[0])  # the first target answers `spec.target`
        return self

    @model_serializer(mode="wrap")
    def _dump_one_target_field(self, handler: Any) -> Any:
        """A multi-target file is written back with `targets` only (so it validates again)."""
        data = handler(self)
        if self.targets is not None:
            data.pop("target", None)
        else:
            data.pop("targets", None)
        return data

    @property
    def all_targets(self) -> list[TargetSpec]:
        """Every target, in file order (one for a `target:` file)."""
        return list(self.targets) if self.targets is not None else [self.target]

    @property
    def multi_target(self) -> bool:
        return self.targets is not None and len(self.targets) > 1

    @field_validator("name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("correctness", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false

    @model_validator(mode="after")
    def _until_known_by_default(self) -> ExperimentSpec:
        """Absent `traffic.until_known`: on for concurrency and rate levels and under adaptive search (where levels
        hold their load), off for phases and stairs (SageMaker's fixed phases)."""
        traffic = self.traffic
        holds = traffic.shape in ("concurrency", "rate") or self.search.adaptive
        if traffic.until_known is None and traffic.rampless and holds:
            object.__setattr__(traffic, "until_known", UntilKnown())
        return self

    @model_validator(mode="after")
    def _vllm_serves_a_llama(self) -> ExperimentSpec:
        """A vllm or llamacpp target generates: it serves the Llama of `model.source: llama`, which only a generative
        target (vllm, llamacpp, or a remote chat / completions endpoint) can be sent to."""
        kinds = {target.kind for target in self.all_targets}
        servers = kinds & set(LLAMA_SERVERS)
        if servers and self.model.source != "llama":
            raise ValueError(
                f"target kind {' and '.join(sorted(servers))} serves a generative model: set model.source llama "
                f"(with its architecture), not {self.model.source}"
            )
        others = sorted({target.kind for target in self.all_targets if not target.generative})
        if self.model.source == "llama" and others:
            raise ValueError(
                f"model.source llama is a generative model: served by target kind {' or '.join(LLAMA_SERVERS)} (or "
                f"measured on a generative remote endpoint, protocol openai-chat or openai-completions), not "
                f"{', '.join(others)}"
            )
        return self

    @model_validator(mode="after")
    def _binary_tensors_need_kserve(self) -> ExperimentSpec:
        if self.traffic.request_encoding != "binary":
            return self
        for target in self.all_targets:
            if target.kind in ("sagemaker", "infinity", *LLAMA_SERVERS) or (
                target.kind == "remote" and target.protocol != "kserve"
            ):
                raise ValueError(
                    f"traffic.request_encoding: binary sends KServe v2 binary tensors, which a {target.kind} target "
                    f"({target.protocol if target.kind == 'remote' else 'its own API'}) does not take; use "
                    "request_encoding: json"
                )
        return self

    @model_validator(mode="after")
    def _ranges_need_adaptive(self) -> ExperimentSpec:
        ranged = sorted(self.variants.ranged_axes())
        if ranged and not self.search.adaptive:
            raise ValueError(
                f"variants.{ranged[0]}: a {{range: [low, high]}} needs `search: adaptive` (the sampler "
                f"searches ranges); grid search needs a list of values, e.g. [1, 2, 4]"
            )
        return self

    @model_validator(mode="after")
    def _prompts_from_one_place(self) -> ExperimentSpec:
        """A mooncake trace gives every request's lengths: the payload may only name the tokenizer and seed; without
        one, synthetic prompts need their lengths."""
        trace, payload = self.traffic.trace, self.payload
        generation = payload.generation
        if trace is not None and trace.format == "mooncake":
            if payload.file is not None or tuple(payload.texts) != DEFAULT_TEXTS:
                raise ValueError(
                    "traffic.trace: a mooncake trace sends synthetic prompts at its rows' lengths; drop payload.file "
                    "and payload.texts (payload.generation may name the tokenizer and seed)"
                )
            if generation is not None and generation.lengths_given:
                raise ValueError(
                    "payload.generation: the mooncake trace's rows give the lengths and the prompts here; drop "
                    f"{', '.join(generation.lengths_given)} (keep only tokenizer and seed)"
                )
        elif generation is not None:
            missing = [name for name in ("input_tokens", "output_tokens") if getattr(generation, name) is None]
            if missing:
                raise ValueError(
                    f"payload.generation: give {' and '.join(missing)} (mean and stddev in tokens), "
                    "e.g. input_tokens: {mean: 512, stddev: 64}"
                )
        synthetic = generation is not None or (trace is not None and trace.format == "mooncake")
        embedding = [target_label(target) for target in self.all_targets if not target.generative]
        if synthetic and embedding:
            where = "payload.generation" if generation is not None else "traffic.trace (format mooncake)"
            raise ValueError(
                f"{where}: synthetic prompts are sent to generative endpoints only, and target "
                f"{', '.join(embedding)} does not generate; use kind vllm, or kind remote with protocol openai-chat "
                "or openai-completions, or drop the prompts"
            )
        return self
