"""Tiny models saved as user model files: a TorchScript embedding model (input_ids, attention_mask -> FP32
[batch, 8]), and any small torch module exported to ONNX with the inputs named in the order given."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any


def save_pooling_model(path: Path, seed: int = 0) -> Path:
    """Embedding + attention-masked mean pooling over the bert-uncased vocabulary; the seed sets the file's bytes."""
    import torch

    class Pooling(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(30522, 8)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            mask = attention_mask.unsqueeze(-1).to(torch.float32)
            return (self.embedding(input_ids) * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1.0)

    torch.manual_seed(seed)
    torch.jit.script(Pooling().eval()).save(str(path))
    return path


def save_onnx(module: Any, path: Path, input_names: list[str], dynamic: dict[int, str]) -> Path:
    """`module` (taking int64 [2, 3] inputs named `input_names`, in that order) exported to ONNX at `path` with the
    output `embedding`; `dynamic` names its dynamic axes, on every input."""
    import torch

    example = torch.ones(2, 3, dtype=torch.int64)
    with warnings.catch_warnings():  # the legacy exporter's deprecation notice (recommender's export uses it too)
        warnings.simplefilter("ignore")
        torch.onnx.export(
            module,
            tuple(example for _ in input_names),
            str(path),
            input_names=input_names,
            output_names=["embedding"],
            dynamic_axes={name: dynamic for name in (*input_names, "embedding")},
            opset_version=17,
            dynamo=False,
        )
    return path
