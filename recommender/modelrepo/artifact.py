"""What an export produces: a model file plus the tensors it takes and returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ArtifactFormat = Literal["torchscript", "onnx", "openvino", "tensorrt"]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output tensor; `dims` excludes the batch dimension, -1 marks a variable size."""

    name: str
    dtype: str  # Triton data type, e.g. "TYPE_INT64", "TYPE_FP32"
    dims: tuple[int, ...]


@dataclass(frozen=True)
class ModelArtifact:
    """An exported model file and its signature. Inputs are fed in order as positional arguments."""

    path: Path
    format: ArtifactFormat
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    random_weights: bool = False
