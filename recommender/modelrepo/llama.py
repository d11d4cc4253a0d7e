"""The Llama a generative target serves (`model.source: llama`): a decoder with RANDOM weights (seeded; serving speed
does not depend on weight values) built from the experiment's architecture, with the packaged bert-uncased tokenizer
(model_source.minilm_dir, the tokenizer synthetic prompts are counted with) and a plain chat template, saved as a
Hugging Face folder (config.json, model.safetensors, the tokenizer's files) that vLLM loads offline.

    llama_folder(architecture) -> ~/.cache/recommender/models/llama-<key>/   (built once, seconds; then read)

The key hashes what decides the folder's bytes (the architecture, the seed, the packaged tokenizer's version, the
layout here), so a changed architecture is a new folder and an unchanged one is never rebuilt. A folder is written
to a staging folder and renamed last: a build cut short is never taken as built.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from recommender.errors import BuildError
from recommender.modelrepo.model_source import PACKAGED_MODEL, installed_version, minilm_dir
from recommender.spec import LlamaArchitecture, ModelSpec

SEED = 0
CONTEXT = 4096  # max_position_embeddings: room for long prompts and outputs (vLLM sizes its KV cache from it)
LAYOUT = 1  # raised whenever what is written changes: every cached folder is then built again
CACHE = Path.home() / ".cache" / "recommender" / "models"
BUILT = "config.json"  # written by save_pretrained; the folder is renamed into place only after everything
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "special_tokens_map.json")
# the prompt a chat request becomes: each message as "role: content" on its line, then "assistant:" to answer
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def llama_folder(architecture: LlamaArchitecture, cache: Path | None = None) -> Path:
    """The Hugging Face folder of this architecture's Llama in `cache` (default CACHE), built on first use."""
    folder = Path(cache or CACHE) / f"llama-{folder_key(architecture)}"
    if (folder / BUILT).exists():
        return folder
    staging = folder.with_name(f"{folder.name}.tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        _build(architecture, staging)
        if not (folder / BUILT).exists():  # another job may have finished the same folder meanwhile
            shutil.rmtree(folder, ignore_errors=True)  # a folder without its config: not built
            with contextlib.suppress(OSError):  # lost a race to another job's rename: its folder is the same
                staging.rename(folder)
        if not (folder / BUILT).exists():
            raise BuildError(f"building the Llama folder {folder} failed: it has no {BUILT}")
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder


def served_folder(model: ModelSpec) -> Path | None:
    """The model folder a server that loads one itself (vLLM) is given: the Llama's, built on first use; None for
    every other source (Triton is given a repository, Infinity serves the packaged MiniLM)."""
    if model.source != "llama":
        return None
    assert isinstance(model.architecture, LlamaArchitecture)  # the spec requires one for llama
    return llama_folder(model.architecture)


def folder_key(architecture: LlamaArchitecture) -> str:
    """16 hex digits of what decides the folder's bytes."""
    identity = {
        "architecture": architecture.model_dump(mode="json"),
        "seed": SEED,
        "context": CONTEXT,
        "tokenizer": f"{PACKAGED_MODEL}=={installed_version(PACKAGED_MODEL)}",
        "layout": LAYOUT,
    }
    return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]


def _build(architecture: LlamaArchitecture, folder: Path) -> None:
    """Config, seeded random weights (safetensors) and the tokenizer with its chat template, into `folder`."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = _copy_tokenizer(folder)
    config = LlamaConfig(
        vocab_size=tokenizer["vocab_size"],
        hidden_size=architecture.hidden,
        intermediate_size=architecture.intermediate or 4 * architecture.hidden,
        num_hidden_layers=architecture.layers,
        num_attention_heads=architecture.heads,
        num_key_value_heads=architecture.kv_heads or architecture.heads,
        max_position_embeddings=CONTEXT,
        bos_token_id=tokenizer["bos"],
        eos_token_id=tokenizer["eos"],
        pad_token_id=tokenizer["pad"],
        tie_word_embeddings=False,
        dtype="float32",
    )
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config).eval()
    model.save_pretrained(str(folder), safe_serialization=True)


def _copy_tokenizer(folder: Path) -> dict[str, int]:
    """The packaged tokenizer's files into `folder`, its config given the chat template and the context length;
    returns its vocabulary size and the ids of [CLS] (bos), [SEP] (eos) and [PAD]."""
    source = minilm_dir()
    for name in TOKENIZER_FILES:
        shutil.copyfile(source / name, folder / name)
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    config.pop("max_length", None)  # a truncation default of the encoder's (128 tokens), not a decoder's
    config.update(model_max_length=CONTEXT, chat_template=CHAT_TEMPLATE)
    config_path.write_text(json.dumps(config, indent=2), encoding="utf-8")
    vocabulary = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    try:
        return {
            "vocab_size": len(vocabulary),
            "bos": vocabulary[config["cls_token"]],
            "eos": vocabulary[config["sep_token"]],
            "pad": vocabulary[config["pad_token"]],
        }
    except KeyError as error:
        raise BuildError(f"the packaged tokenizer in {source} has no {error} token") from None
