"""Shared fixtures for the integration tier: tiny exported models and model repositories for a real tritonserver."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.candidates import Candidate
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import DynamicBatching

VOCAB, HIDDEN = 64, 8
INPUTS = (TensorSpec("input_ids", "TYPE_INT64", (-1,)), TensorSpec("attention_mask", "TYPE_INT64", (-1,)))
OUTPUTS = (TensorSpec("embedding", "TYPE_FP32", (HIDDEN,)),)


def pooling_module(vocab: int = VOCAB):
    """Embedding + attention-masked mean pooling over `vocab` token ids (random weights, seeded)."""
    import torch

    class MeanPooling(torch.nn.Module):
        """Embedding + attention-masked mean pooling: INT64 [batch, seq] x2 -> FP32 [batch, hidden]."""

        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(vocab, HIDDEN)

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            mask = attention_mask.unsqueeze(-1).to(torch.float32)
            summed = (self.embedding(input_ids) * mask).sum(dim=1)
            return summed / mask.sum(dim=1).clamp(min=1.0)

    torch.manual_seed(0)
    return MeanPooling().eval()


@pytest.fixture(scope="session")
def pooling_model():
    """The eager model the artifacts are exported from (the in-process reference)."""
    return pooling_module()


@pytest.fixture(scope="session")
def torchscript_artifact(tmp_path_factory: pytest.TempPathFactory, pooling_model) -> ModelArtifact:
    import torch

    path = tmp_path_factory.mktemp("export") / "model.pt"
    torch.jit.script(pooling_model).save(str(path))
    return ModelArtifact(path, "torchscript", INPUTS, OUTPUTS, random_weights=True)


@pytest.fixture(scope="session")
def onnx_artifact(tmp_path_factory: pytest.TempPathFactory, pooling_model) -> ModelArtifact:
    return export_onnx(pooling_model, tmp_path_factory.mktemp("export") / "model.onnx")


def export_onnx(model, path: Path) -> ModelArtifact:
    """`model` exported to ONNX with dynamic batch and sequence axes (the legacy exporter: no onnxscript needed)."""
    import torch

    example = (torch.ones(2, 5, dtype=torch.int64), torch.ones(2, 5, dtype=torch.int64))
    axes = {0: "batch", 1: "sequence"}
    torch.onnx.export(
        model,
        example,
        str(path),
        input_names=["input_ids", "attention_mask"],
        output_names=["embedding"],
        dynamic_axes={"input_ids": axes, "attention_mask": axes, "embedding": {0: "batch"}},
        opset_version=17,
        dynamo=False,
    )
    return ModelArtifact(path, "onnx", INPUTS, OUTPUTS, random_weights=True)


@pytest.fixture(scope="session")
def artifacts(torchscript_artifact: ModelArtifact, onnx_artifact: ModelArtifact) -> dict[str, ModelArtifact]:
    """Artifact per optimization, as the build step hands them over."""
    return {"pt": torchscript_artifact, "onnx": onnx_artifact}


@pytest.fixture
def repository_for(tmp_path: Path, artifacts: dict[str, ModelArtifact]):
    """Write a model repository for an optimization with dynamic batching on; returns its root."""

    def write(
        optimization: str,
        instance_group_count: int = 1,
        max_batch_size: int = 4,
        queue_delay_us: int = 1000,
        padding: str = "max",
    ) -> Path:
        batching = DynamicBatching(max_queue_delay_microseconds=queue_delay_us, preferred_batch_size=[2, 4])
        candidate = Candidate(optimization, batching, instance_group_count, max_batch_size, "local", padding=padding)
        return write_model_repository(candidate, artifacts[optimization], tmp_path / f"repo-{optimization}")

    return write


@pytest.fixture
def token_ids() -> dict[str, np.ndarray]:
    """A batch of two sequences with padding in the second."""
    return {
        "input_ids": np.array([[3, 7, 11, 2, 9], [5, 1, 4, 0, 0]], dtype=np.int64),
        "attention_mask": np.array([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]], dtype=np.int64),
    }
