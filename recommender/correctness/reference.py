"""The reference outputs the gate compares with: the model run in-process on CPU, or a file of expected outputs.

- minilm / bert sources: PyTorch eager on CPU with the same weights the exports start from;
- a user TorchScript file: that file on CPU with PyTorch (TorchScript);
- a user ONNX file: that file with onnxruntime's CPU execution provider;
- `correctness.reference_outputs`: a JSON file {case name: {output name: [[values per row]]}} for an endpoint whose
  model is not available here (remote); only the cases it names are checked;
- a generative model (the served folder of modelrepo/llama.py): transformers on the same weights, fp32, greedy
  (`generation_reference`): each prompt's first N tokens with their logprobs and top-2 margins.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from recommender.correctness.cases import Case
from recommender.correctness.tokens import Continuation
from recommender.errors import SpecError
from recommender.files.document import load_json
from recommender.spec import ModelSpec

Rows = list[list[float]]


@dataclass(frozen=True)
class Reference:
    """Identity (what ran, which version) and a function from a case to its outputs by name (None: case not known)."""

    identity: dict[str, str]
    outputs: Callable[[Case], dict[str, Rows] | None]


_KEPT: dict[str, Reference] = {}  # by model and outputs file: built once per process, its outputs once per case
_KEPT_LOCK = threading.Lock()  # candidates are checked on several threads (max_parallel)


def reference_for(model: ModelSpec, outputs_file: Path | None) -> Reference:
    """The reference of an experiment: the outputs file when given, else the model in-process. Built once per model
    in a process, and each case's outputs computed once: every candidate of a run is checked against the same
    reference, so loading and running the model again per candidate would spend the same seconds again."""
    key = json.dumps([model.model_dump(mode="json"), str(outputs_file) if outputs_file else None], sort_keys=True)
    with _KEPT_LOCK:
        if key not in _KEPT:
            _KEPT[key] = _remembering(_build(model, outputs_file))
        return _KEPT[key]


def _build(model: ModelSpec, outputs_file: Path | None) -> Reference:
    if outputs_file is not None:
        return _from_file(outputs_file)
    if model.source == "onnx":
        assert model.path is not None  # the spec requires a path for an onnx model
        return _onnxruntime(model.path)
    return _torch(model)


def _remembering(reference: Reference) -> Reference:
    """The same reference, each case's outputs computed on first use only (a case is its name and its inputs)."""
    seen: dict[str, dict[str, Rows] | None] = {}
    lock = threading.Lock()

    def outputs(case: Case) -> dict[str, Rows] | None:
        key = json.dumps([case.name, case.ids, case.mask])
        with lock:
            if key not in seen:
                seen[key] = reference.outputs(case)
            return seen[key]

    return Reference(reference.identity, outputs)


def _from_file(path: Path) -> Reference:
    document = load_json(path, "reference outputs file", SpecError)
    if not isinstance(document, dict) or not document:
        raise SpecError(f"{path}: reference outputs must be a JSON object {{case name: {{output name: [[...], ...]}}}}")
    return Reference(
        {"kind": "reference outputs file", "path": str(path), "version": "-"}, lambda case: document.get(case.name)
    )


def _torch(model: ModelSpec) -> Reference:
    import torch

    from recommender.modelrepo.export import OUTPUT_NAME
    from recommender.modelrepo.model_source import load_torch_model

    if model.source == "torchscript":
        module, kind = (
            torch.jit.load(str(model.path), map_location="cpu").eval(),
            "PyTorch TorchScript on CPU (the user's file)",
        )
    else:
        module, kind = load_torch_model(model), "PyTorch eager on CPU (same weights)"

    def run(case: Case) -> dict[str, Rows]:
        with torch.no_grad():
            result = module(torch.tensor(case.ids, dtype=torch.int64), torch.tensor(case.mask, dtype=torch.int64))
        return {OUTPUT_NAME: _rows(result.float().numpy())}

    return Reference({"kind": kind, "library": "torch", "version": torch.__version__}, run)


def _onnxruntime(path: Path) -> Reference:
    import numpy as np
    import onnxruntime

    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]

    def run(case: Case) -> dict[str, Rows]:
        feeds = {"input_ids": np.array(case.ids, dtype=np.int64), "attention_mask": np.array(case.mask, dtype=np.int64)}
        return {
            name: _rows(np.asarray(value, dtype=np.float64))
            for name, value in zip(names, session.run(None, feeds), strict=False)
        }

    return Reference(
        {
            "kind": "onnxruntime CPUExecutionProvider (the user's ONNX file; PyTorch cannot run it)",
            "library": "onnxruntime",
            "version": onnxruntime.__version__,
        },
        run,
    )


def _rows(array: Any) -> Rows:
    """[rows][values]: the first dimension is the batch, the rest flattened."""
    return array.reshape(array.shape[0], -1).astype(float).tolist()


@dataclass(frozen=True)
class GenerationReference:
    """Identity, the prompt's token ids as the served folder's tokenizer makes them (chat: its chat template), a
    prompt's greedy continuation, and a token's text."""

    identity: dict[str, str]
    prompt_ids: Callable[[str | tuple[dict, ...], bool], list[int]]
    continuation: Callable[[list[int], int], Continuation]
    decode: Callable[[int], str]
    tokenize: Callable[[str], list[int]]  # a generated text's tokens (for a server that returns no token ids)


_GENERATIVE: dict[str, GenerationReference] = {}  # by folder: loaded once per process, each continuation once


def generation_reference(folder: Path) -> GenerationReference:
    """The reference of a generative model folder: loaded once per process; each (prompt, N) computed once."""
    key = str(Path(folder).resolve())
    with _KEPT_LOCK:
        if key not in _GENERATIVE:
            _GENERATIVE[key] = _greedy(Path(folder))
        return _GENERATIVE[key]


def _greedy(folder: Path) -> GenerationReference:
    import torch
    import transformers
    from transformers import AutoTokenizer, LlamaForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(str(folder))
    model = LlamaForCausalLM.from_pretrained(str(folder), dtype=torch.float32).eval()
    seen: dict[str, Continuation] = {}
    lock = threading.Lock()

    def prompt_ids(content: str | tuple[dict, ...], chat: bool) -> list[int]:
        """Completions: the text as the server tokenizes a prompt (special tokens added); chat: the messages through
        the chat template, then tokenized as the server does (none added: the template holds the text)."""
        if chat:
            messages = [{"role": "user", "content": content}] if isinstance(content, str) else list(content)
            text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
            return list(tokenizer(text, add_special_tokens=False)["input_ids"])
        assert isinstance(content, str)  # a completions prompt is a text (wire.generation_body refuses messages)
        return list(tokenizer(content)["input_ids"])

    def continuation(ids: list[int], n: int) -> Continuation:
        key = json.dumps([ids, n])
        with lock:
            if key not in seen:
                seen[key] = _continue(model, ids, n)
            return seen[key]

    return GenerationReference(
        {
            "kind": f"transformers fp32 greedy on CPU (the served folder's weights: {folder.name})",
            "library": "transformers",
            "version": transformers.__version__,
        },
        prompt_ids,
        continuation,
        lambda token: str(tokenizer.decode([token])),
        lambda text: list(tokenizer(text, add_special_tokens=False)["input_ids"]),
    )


def _continue(model: Any, ids: list[int], n: int) -> Continuation:
    """N greedy steps (end of sequence ignored, as the gate asks the server): each step's top token, its logprob and
    the margin to the second."""
    import torch

    tokens, logprobs, margins = [], [], []
    with torch.no_grad():
        out = model(torch.tensor([ids], dtype=torch.int64), use_cache=True)
        for _ in range(n):
            scores = torch.log_softmax(out.logits[0, -1].float(), dim=-1)
            top = torch.topk(scores, 2)
            token = int(top.indices[0])
            tokens.append(token)
            logprobs.append(float(top.values[0]))
            margins.append(float(top.values[0] - top.values[1]))
            step = torch.tensor([[token]], dtype=torch.int64)
            out = model(step, cache=out.cache, use_cache=True)
    return Continuation(tokens, logprobs, margins)
