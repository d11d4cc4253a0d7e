"""The grid of serving variants (optimizations, precisions, dynamic batching, instance groups, max batch sizes,
padding)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AliasChoices, Discriminator, Field, Tag, model_validator

from recommender.spec.base import MAX_GRID, Optimization, Padding, Precision, Strict
from recommender.spec.search import IntRange


def _axis_kind(value: Any) -> str:
    return "IntRange" if isinstance(value, (dict, IntRange)) else "values"


class DynamicBatching(Strict):
    """Triton dynamic batching settings (the `dynamic_batching { ... }` block of config.pbtxt)."""

    max_queue_delay_microseconds: Annotated[
        Annotated[int, Field(ge=0), Tag("values")] | Annotated[IntRange, Tag("IntRange")],
        Discriminator(_axis_kind),
    ] = Field(
        100,
        description="How long a request may wait to form a batch; `{range: [0, 5000]}` under adaptive "
        "search only (the sampler picks the delay).",
    )
    preferred_batch_size: Annotated[
        Annotated[list[Annotated[int, Field(ge=1)]], Tag("values")] | Annotated[IntRange, Tag("IntRange")],
        Discriminator(_axis_kind),
    ] = Field(
        default_factory=list,
        description="Batch sizes the scheduler aims for; `{range: [1, 32], log: true}` "
        "under adaptive search only (the sampler picks one preferred size; one above the candidate's "
        "max_batch_size is dropped, as in a list).",
    )

    @model_validator(mode="after")
    def _sizes_from_one(self) -> DynamicBatching:
        if isinstance(self.preferred_batch_size, IntRange) and self.preferred_batch_size.range[0] < 1:
            raise ValueError(
                f"preferred_batch_size: range {list(self.preferred_batch_size.range)} starts below 1; "
                "batch sizes start at 1, e.g. {range: [1, 32], log: true}"
            )
        return self

    @property
    def ranges(self) -> dict[str, IntRange]:
        """The settings given as ranges (the sampler picks their values), by field name."""
        return {
            name: value
            for name in ("max_queue_delay_microseconds", "preferred_batch_size")
            if isinstance(value := getattr(self, name), IntRange)
        }

    @property
    def ranged(self) -> bool:
        return bool(self.ranges)


DynamicBatchingChoice = bool | DynamicBatching


# A numeric axis: a list of values, or {range: [low, high]} (errors name the list's items, not both union arms).
# Spelled out per bound so that type checkers read them as types.
_InstanceCountAxis = Annotated[
    Annotated[list[Annotated[int, Field(ge=1, le=16)]], Field(min_length=1), Tag("values")]
    | Annotated[IntRange, Tag("IntRange")],
    Discriminator(_axis_kind),
]
_BatchSizeAxis = Annotated[
    Annotated[list[Annotated[int, Field(ge=1, le=1024)]], Field(min_length=1), Tag("values")]
    | Annotated[IntRange, Tag("IntRange")],
    Discriminator(_axis_kind),
]


class VariantGrid(Strict):
    """The grid of serving configurations; every combination becomes a candidate."""

    optimizations: list[Optimization] = Field(
        ["pt"],
        min_length=1,
        description="pt (PyTorch), onnx (ONNX Runtime), trt (TensorRT, GPU only), openvino (OpenVINO, CPU).",
    )
    precisions: list[Precision] = Field(
        ["fp32"],
        min_length=1,
        description="Numeric precision of the engine: fp32, or fp16 (TensorRT only; other "
        "optimizations serve fp32 and their fp16 combinations are not generated).",
    )
    dynamic_batching: list[DynamicBatchingChoice] = Field(
        [False, True],
        min_length=1,
        description="off / on (defaults) / {max_queue_delay_microseconds, preferred_batch_size}.",
    )
    instance_group_counts: _InstanceCountAxis = Field(
        [1],
        validation_alias=AliasChoices("instance_group_counts", "instance_counts"),
        description="Triton instance_group count values (model instances inside one server); "
        "`instance_counts` is accepted as its former name; `{range: [1, 8]}` under adaptive search only.",
    )
    max_batch_sizes: _BatchSizeAxis = Field(
        [8], description="Triton max_batch_size values; `{range: [1, 64], log: true}` under adaptive search only."
    )
    padding: list[Padding] = Field(
        ["max"],
        min_length=1,
        description="How each request is padded: max (every request to the payload's max length, "
        "payload.sequence_length), buckets (to the next power of two, at most that: the dynamic batcher batches "
        "requests of one bucket), none (each at its own length; Triton batches them ragged and the model pads "
        "within the batch).",
    )

    def values(self, axis: str) -> list:
        """An axis's values: its list, or every integer of its range (the space the sampler searches)."""
        value = getattr(self, axis)
        return value.values() if isinstance(value, IntRange) else list(value)

    def ranged_axes(self) -> dict[str, IntRange]:
        """The axes given as numeric ranges (searched by the adaptive sampler), by field name."""
        ranged = {name: getattr(self, name) for name in RANGED_AXES if isinstance(getattr(self, name), IntRange)}
        inner = [r for c in self.dynamic_batching if isinstance(c, DynamicBatching) for r in c.ranges.values()]
        return ranged | ({"dynamic_batching": inner[0]} if inner else {})

    @model_validator(mode="after")
    def _bounded(self) -> VariantGrid:
        for name, (low, high) in {"instance_group_counts": (1, 16), "max_batch_sizes": (1, 1024)}.items():
            given = self.values(name)
            if not given or min(given) < low or max(given) > high:
                raise ValueError(f"{name}: give at least one value, each from {low} to {high}")
        size = (
            len(self.optimizations)
            * len(self.precisions)
            * len(self.dynamic_batching)
            * len(self.values("instance_group_counts"))
            * len(self.values("max_batch_sizes"))
            * len(self.padding)
        )
        if size > MAX_GRID:
            raise ValueError(
                f"the grid has {size:,} combinations; at most {MAX_GRID:,} (split it into several experiments)"
            )
        return self


RANGED_AXES = ("instance_group_counts", "max_batch_sizes")  # the numeric axes that accept {range: [low, high]}
