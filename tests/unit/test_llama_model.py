"""The Llama of `model.source: llama`: built once per architecture into its folder (random weights, seeded), with the
packaged tokenizer, its vocabulary, and a chat template; read back by transformers as vLLM reads it."""

from __future__ import annotations

import json

import pytest

from recommender.modelrepo import llama
from recommender.modelrepo.llama import CHAT_TEMPLATE, llama_folder, served_folder
from recommender.modelrepo.model_source import describe, minilm_dir
from recommender.spec import LlamaArchitecture, ModelSpec

TINY = LlamaArchitecture(layers=1, hidden=32, heads=4, kv_heads=2, intermediate=64)


def test_the_folder_is_built_once_per_architecture_with_the_packaged_tokenizer(tmp_path) -> None:
    from transformers import AutoConfig, AutoTokenizer

    folder = llama_folder(TINY, tmp_path)
    weights = (folder / "model.safetensors").stat()
    config = AutoConfig.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    packaged = json.loads((minilm_dir() / "tokenizer.json").read_text())["model"]["vocab"]
    assert config.vocab_size == len(tokenizer) == len(packaged)
    assert (config.num_hidden_layers, config.hidden_size, config.num_key_value_heads) == (1, 32, 2)
    assert config.eos_token_id == tokenizer.sep_token_id and tokenizer.chat_template == CHAT_TEMPLATE
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True
    )
    assert prompt == "user: hi\nassistant:"
    assert llama_folder(TINY, tmp_path) == folder and (folder / "model.safetensors").stat() == weights  # not rebuilt
    other = llama_folder(TINY.model_copy(update={"layers": 2}), tmp_path)
    assert other != folder and sorted(p.name for p in tmp_path.iterdir()) == sorted([folder.name, other.name])


def test_a_user_is_told_the_weights_are_random() -> None:
    assert "RANDOM weights" in describe(ModelSpec(source="llama", architecture=TINY))


def test_a_server_that_loads_a_folder_is_given_the_llamas_and_no_other_source_one(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(llama, "CACHE", tmp_path)
    assert served_folder(ModelSpec(source="llama", architecture=TINY)) == llama_folder(TINY, tmp_path)
    assert served_folder(ModelSpec(source="minilm")) is None


def test_a_build_cut_short_is_never_taken_as_built(tmp_path, monkeypatch) -> None:
    folder = tmp_path / f"llama-{llama.folder_key(TINY)}"
    folder.mkdir()
    (folder / "vocab.txt").write_text("[PAD]\n")  # what a build killed before its config left
    calls: list[str] = []

    def broken(architecture, staging) -> None:
        calls.append(staging.name)
        raise KeyboardInterrupt  # killed mid-build

    monkeypatch.setattr(llama, "_build", broken)
    with pytest.raises(KeyboardInterrupt):
        llama_folder(TINY, tmp_path)
    assert calls and sorted(p.name for p in tmp_path.iterdir()) == [folder.name]  # no staging folder left
    monkeypatch.undo()
    assert (llama_folder(TINY, tmp_path) / "config.json").exists()  # built this time
