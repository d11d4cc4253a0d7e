"""A tiny TorchScript embedding model saved as a user model file (input_ids, attention_mask -> FP32 [batch, 8])."""

from __future__ import annotations

from pathlib import Path


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
