"""The grid of serving variants (optimizations, precisions, dynamic batching, instance groups, max batch sizes)."""

from __future__ import annotations

from typing import Annotated, Union

from pydantic import AliasChoices, Field, model_validator

from recommender.spec.base import MAX_GRID, Optimization, Precision, Strict


class DynamicBatching(Strict):
    """Triton dynamic batching settings (the `dynamic_batching { ... }` block of config.pbtxt)."""

    max_queue_delay_microseconds: int = Field(100, ge=0, description="How long a request may wait to form a batch.")
    preferred_batch_size: list[int] = Field(default_factory=list, description="Batch sizes the scheduler aims for.")


DynamicBatchingChoice = Union[bool, DynamicBatching]


class VariantGrid(Strict):
    """The grid of serving configurations; every combination becomes a candidate."""

    optimizations: list[Optimization] = Field(["pt"], min_length=1, description="pt (PyTorch), onnx (ONNX Runtime), trt (TensorRT, GPU only), openvino (OpenVINO, CPU).")
    precisions: list[Precision] = Field(
        ["fp32"], min_length=1, description="Numeric precision of the engine: fp32, or fp16 (TensorRT only; other "
        "optimizations serve fp32 and their fp16 combinations are not generated).")
    dynamic_batching: list[DynamicBatchingChoice] = Field(
        [False, True], min_length=1, description="off / on (defaults) / {max_queue_delay_microseconds, preferred_batch_size}."
    )
    instance_group_counts: list[Annotated[int, Field(ge=1, le=16)]] = Field(
        [1], min_length=1, validation_alias=AliasChoices("instance_group_counts", "instance_counts"),
        description="Triton instance_group count values (model instances inside one server); "
        "`instance_counts` is accepted as its former name.")
    max_batch_sizes: list[Annotated[int, Field(ge=1, le=1024)]] = Field([8], min_length=1, description="Triton max_batch_size values.")

    @model_validator(mode="after")
    def _bounded(self) -> "VariantGrid":
        size = len(self.optimizations) * len(self.precisions) * len(self.dynamic_batching) * len(self.instance_group_counts) * len(self.max_batch_sizes)
        if size > MAX_GRID:
            raise ValueError(f"the grid has {size:,} combinations; at most {MAX_GRID:,} (split it into several experiments)")
        return self
