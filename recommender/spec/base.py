"""What every part of the experiment file shares: strict models (unknown keys refused, frozen) and the shared
vocabularies."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

MAX_GRID = 10_000  # combinations of a variant grid: far above any study, below a hostile file's billions
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # experiment names; also safe as a file or folder name
Optimization = Literal["pt", "onnx", "trt", "openvino"]
Precision = Literal["fp32", "fp16"]
# how a request is padded on the wire (load/payload.py padded_length)
Padding = Literal["max", "buckets", "none"]
Accelerator = Literal["auto", "cpu", "gpu"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
