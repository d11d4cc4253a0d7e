"""The prompts a generative endpoint is sent: synthetic (`payload.generation`), the user's file (`payload.file` rows
with `prompt` or `messages`), the payload's texts, or one synthesised per row of a mooncake trace.

    prompts_for(spec, spec_dir) -> [Prompt]   requests cycle through them in order; a trace's payload index picks one
    prompts_fingerprint(prompts) -> 16 hex digits of what is sent (the reuse key follows it)
    check_prompts(spec, spec_path)            make them now (`validate`): what the run would refuse, refused first

Synthetic prompts are words of a local tokenizer (files/tokenizer.py; default: the packaged bert-uncased tokenizer),
each word one token, separated by spaces, so that a prompt re-tokenizes to its drawn length; prompts are counted
again with the tokenizer (every one up to VERIFY_TOKENS tokens in all, else an even spread of them, and every one if
any of those is off), words added or dropped where a count is off, and refused beyond TOLERANCE tokens off. Lengths
are drawn from normal distributions (mean, stddev), rounded and clipped to at least 1 token, seeded. `input_tokens`
counts the prompt's own tokens, without the special tokens a tokenizer adds around a text or the tokens of a
server's chat template. With shared prefixes, prompt k opens with prefix k mod K (K distinct prefixes of N tokens:
what a server's prefix cache can reuse).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from recommender.errors import InputError, SpecError
from recommender.files.payload_file import PayloadRequest
from recommender.files.tokenizer import read_tokenizer
from recommender.files.trace import read_trace
from recommender.load.payload_source import payload_requests
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import ExperimentSpec, GenerationSpec, PayloadSpec

DEFAULT_OUTPUT_TOKENS = 16  # what a text or a file row that states no output length asks for
TOLERANCE = 2  # tokens a synthetic prompt may re-tokenize off its drawn length
VERIFY_TOKENS = 500_000  # tokens re-counted per payload at most, unless a count is off (_counts)
MIN_WORDS = 100  # a tokenizer with fewer single-token words cannot make distinct prompts
_REDRAWS = 20  # draws of a prompt's own words before two prompts that came out alike are refused
_WORD = re.compile(r"[A-Za-z]{2,}")


@dataclass(frozen=True)
class Prompt:
    """One prompt: a text (completions; chat sends it as one user message) or chat `messages`, its input tokens as
    the tokenizer counts them, and the tokens the server is asked to generate (max_tokens, end-of-sequence ignored)."""

    text: str | None
    messages: tuple[dict, ...] | None
    input_tokens: int
    output_tokens: int

    @property
    def content(self) -> str | tuple[dict, ...]:
        """What a request body carries: the text, else the chat messages (targets/wire.py generation_body)."""
        if self.text is not None:
            return self.text
        assert self.messages is not None  # a prompt holds one of the two
        return self.messages


def prompts_for(spec: ExperimentSpec, spec_dir: Path) -> list[Prompt]:
    """The prompts of the experiment, in the order requests cycle through them (relative paths: from `spec_dir`)."""
    trace, payload = spec.traffic.trace, spec.payload
    generation = payload.generation
    if trace is not None and trace.format == "mooncake":  # one prompt per row, at the row's lengths
        rows = read_trace(spec_dir / trace.file, format="mooncake")
        assert rows.input_lengths is not None and rows.output_lengths is not None  # a mooncake trace has both
        lengths = (tuple(rows.input_lengths.tolist()), tuple(rows.output_lengths.tolist()))
        return list(_synthetic(generation or GenerationSpec(), _tokenizer_folder(generation, spec_dir), lengths))
    if generation is not None:
        return list(_synthetic(generation, _tokenizer_folder(generation, spec_dir), None))
    return _payload_prompts(payload, spec_dir)


def check_prompts(spec: ExperimentSpec, spec_path: Path) -> None:
    """Make the experiment's synthetic prompts now (`recommender validate`), so that what the run would refuse (a
    tokenizer without enough one-token words, prompts that cannot be told apart, a count that is off) is refused
    first: a SpecError naming the experiment file and the field."""
    if not synthesised(spec):
        return
    try:
        prompts_for(spec, spec_path.parent)
    except InputError as exc:
        field = "traffic.trace.file" if spec.payload.generation is None else "payload.generation"
        raise SpecError(
            f"{spec_path} is not a valid experiment file", [f"{spec_path}: {field}: {exc.message}"], exc.hint
        ) from None


def synthesised(spec: ExperimentSpec) -> bool:
    """Whether the experiment's prompts are synthetic (`payload.generation`, or a mooncake trace's rows)."""
    trace = spec.traffic.trace
    return spec.payload.generation is not None or (trace is not None and trace.format == "mooncake")


def prompts_fingerprint(prompts: list[Prompt]) -> str:
    """What the prompts are, hashed: the same prompts in the same order give the same fingerprint."""
    canonical = json.dumps([asdict(prompt) for prompt in prompts], separators=(",", ":"), sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _tokenizer_folder(generation: GenerationSpec | None, spec_dir: Path) -> Path:
    if generation is None or generation.tokenizer is None:
        return minilm_dir()
    return spec_dir / generation.tokenizer


def _payload_prompts(payload: PayloadSpec, spec_dir: Path) -> list[Prompt]:
    """The texts' or the file's requests as prompts, counted with the packaged tokenizer."""
    if payload.file is not None:
        payload = payload.model_copy(update={"file": spec_dir / payload.file})
    tokenizer = read_tokenizer(minilm_dir())
    return [_request_prompt(request, tokenizer) for request in payload_requests(payload)]


def _request_prompt(request: PayloadRequest, tokenizer: Any) -> Prompt:
    """Messages as they are (their contents counted), a text as it is, token ids decoded."""
    output = request.output_tokens or DEFAULT_OUTPUT_TOKENS
    if request.messages is not None:
        return Prompt(None, tuple(request.chat()), _count(tokenizer, request.content() or ""), output)
    text = request.text or ""
    if request.input_ids is not None:
        text = tokenizer.decode(list(request.input_ids), skip_special_tokens=True)
    return Prompt(text, None, _count(tokenizer, text), output)


def _count(tokenizer: Any, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)


@lru_cache(maxsize=2)  # up to MAX_PROMPTS_TOKENS of text each: the payload's prompts and one other at most
def _synthetic(
    generation: GenerationSpec, folder: Path, lengths: tuple[tuple[int, ...], tuple[int, ...]] | None
) -> tuple[Prompt, ...]:
    """`generation`'s prompts, or one per (input, output) length pair of a trace; cached: the reuse key and the run
    ask for the same prompts."""
    tokenizer = read_tokenizer(folder)
    words = _single_token_words(tokenizer, str(folder))
    rng = np.random.default_rng(generation.seed)
    prefix = generation.prefix
    if lengths is None:
        assert generation.input_tokens is not None and generation.output_tokens is not None  # the spec requires them
        inputs = _draw(rng, generation.input_tokens.mean, generation.input_tokens.stddev, generation.count)
        outputs = _draw(rng, generation.output_tokens.mean, generation.output_tokens.stddev, generation.count)
    else:
        inputs, outputs = np.asarray(lengths[0], dtype=np.int64), np.asarray(lengths[1], dtype=np.int64)
    shared = [_words(rng, words, prefix.tokens) for _ in range(prefix.count)] if prefix is not None else []
    own = np.maximum(inputs - (prefix.tokens if prefix is not None else 0), 1)  # each prompt keeps a part its own
    texts = _distinct_texts(rng, words, shared, own, distinct=lengths is None)
    asked = own + (prefix.tokens if prefix is not None else 0)
    counts = _counts(tokenizer, texts, asked)
    prompts = []
    for k, text in enumerate(texts):
        counted = counts.get(k, int(asked[k]))
        text, counted = _fitted(tokenizer, rng, words, text, counted, int(asked[k]), folder)
        prompts.append(Prompt(text, None, counted, int(outputs[k])))
    return tuple(prompts)


def _counts(tokenizer: Any, texts: list[str], asked: np.ndarray) -> dict[int, int]:
    """Each prompt's tokens as the tokenizer counts them, by index. Within VERIFY_TOKENS every prompt is counted; a
    larger payload (a long trace) counts prompts spread evenly through it up to that budget, and every prompt once
    any of those is off (the words compose exactly where the tokenizer splits at spaces, as bert-uncased and
    SentencePiece's do)."""
    picked = np.arange(len(texts))
    if int(asked.sum()) > VERIFY_TOKENS:
        spread = max(1, int(VERIFY_TOKENS / max(float(asked.mean()), 1.0)))
        picked = np.unique(np.linspace(0, len(texts) - 1, min(spread, len(texts))).astype(np.int64))
    counts = _counted(tokenizer, texts, picked)
    if len(picked) < len(texts) and any(counts[k] != int(asked[k]) for k in counts):
        counts = _counted(tokenizer, texts, np.arange(len(texts)))
    return counts


def _counted(tokenizer: Any, texts: list[str], picked: np.ndarray) -> dict[int, int]:
    encoded = tokenizer.encode_batch([texts[k] for k in picked.tolist()], add_special_tokens=False)
    return {k: len(encoding.ids) for k, encoding in zip(picked.tolist(), encoded, strict=True)}


def _draw(rng: np.random.Generator, mean: int, stddev: float, count: int) -> np.ndarray:
    """`count` lengths from a normal distribution, rounded, at least 1."""
    return np.maximum(np.rint(rng.normal(mean, stddev, count)), 1).astype(np.int64)


def _words(rng: np.random.Generator, words: tuple[str, ...], count: int) -> str:
    return " ".join(words[i] for i in rng.integers(0, len(words), count))


def _distinct_texts(
    rng: np.random.Generator, words: tuple[str, ...], shared: list[str], own: np.ndarray, distinct: bool
) -> list[str]:
    """Prompt k: prefix k mod K (if any), then its own `own[k]` words; redrawn while it equals an earlier one."""
    texts: list[str] = []
    seen: set[str] = set()
    for k, length in enumerate(own.tolist()):
        for _ in range(_REDRAWS):
            text = " ".join(part for part in (shared[k % len(shared)] if shared else "", _words(rng, words, length)))
            text = text.strip()
            if not distinct or text not in seen:
                break
        else:
            raise InputError(
                f"cannot make {len(own):,} distinct prompts of about {length} tokens (prompt {k + 1} came out as an "
                "earlier one every time)",
                hint="Raise input_tokens.mean (or its stddev), or lower count.",
            )
        seen.add(text)
        texts.append(text)
    return texts


def _fitted(
    tokenizer: Any, rng: np.random.Generator, words: tuple[str, ...], text: str, counted: int, asked: int, folder: Path
) -> tuple[str, int]:
    """The text re-tokenizing to `asked` tokens: words dropped or added at its end while it is off (a tokenizer
    that merges across spaces), refused beyond TOLERANCE tokens off."""
    for _ in range(8):
        if counted == asked:
            break
        if counted > asked and " " in text:
            text = text.rsplit(" ", 1)[0]
        elif counted < asked:
            text = f"{text} {_words(rng, words, asked - counted)}"
        counted = _count(tokenizer, text)
    if abs(counted - asked) > TOLERANCE:
        raise InputError(
            f"{folder}: a synthetic prompt of {asked} tokens re-tokenizes to {counted} with this tokenizer",
            hint="Use the model's own tokenizer folder, or leave payload.generation.tokenizer out.",
        )
    return text, counted


@lru_cache(maxsize=4)
def _single_token_words(tokenizer: Any, name: str) -> tuple[str, ...]:
    """The vocabulary's plain words (ASCII letters, 2 or more) that encode to one token on their own, sorted."""
    decoded = {tokenizer.decode([i]).strip() for i in tokenizer.get_vocab().values()}
    candidates = sorted(word for word in decoded if _WORD.fullmatch(word))
    encoded = tokenizer.encode_batch(candidates, add_special_tokens=False) if candidates else []
    words = tuple(word for word, encoding in zip(candidates, encoded, strict=True) if len(encoding.ids) == 1)
    if len(words) < MIN_WORDS:
        raise InputError(
            f"{name}: the tokenizer has {len(words)} plain words that are one token each; synthetic prompts need "
            f"at least {MIN_WORDS}",
            hint="Use the model's own tokenizer folder, or leave payload.generation.tokenizer out.",
        )
    return words
