"""llama.cpp's settings (target.kind llamacpp): the lists an experiment file gives (`target.llamacpp`), and one
candidate's settings, as the candidate's `engine` JSON, its name and llama-server's flags.

    LlamaCppVariants(parallel=[1, 4], threads=[1]).settings() -> [LlamaCppSettings(...), ...]  (the grid)
    LlamaCppSettings.from_engine(candidate.engine).flags()   -> ["-np", "4", "-b", "2048", ...]

A micro-batch larger than its batch is served as the batch (llama.cpp caps -ub at -b), so such a pair is the
candidate with -ub equal to -b, never a second one. A list may hold `null`: that setting left to llama-server (no
flag); DEFAULT leaves them all, the engine's own configuration (`llamacpp-default`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Annotated, Any, Literal

from pydantic import Field

from recommender.spec.base import Strict

GgufType = Literal["f32", "f16", "bf16", "q8_0"]  # targets/gguf.py GGUF_TYPES
KvCacheType = Literal["f32", "f16", "bf16"]  # --cache-type-k/-v; quantised caches need flash attention: not offered


@dataclass(frozen=True)
class LlamaCppSettings:
    """One llama-server configuration: the weights' GGUF type and the server's flags."""

    gguf_type: str = "f32"
    # None, for any of these four: the flag is not given, llama-server's own value stands (DEFAULT)
    parallel: int | None = 1  # -np: slots, sequences decoded together
    batch: int | None = 2048  # -b: the logical batch (tokens per decode call)
    ubatch: int | None = 512  # -ub: the physical batch (tokens per compute graph)
    threads: int | None = 1  # -t and -tb: CPU threads generating and processing prompts
    continuous_batching: bool = True  # -cb / -nocb
    # --repack / --no-repack: llama.cpp's weight repacking into its CPU "extra buffer types"; on x86 for f32 and q8_0
    # that is the AMX kernels. Off unless asked: a CPU that advertises AMX where the host does not let programs use
    # it (a VM: this project's own build host) kills llama-server with SIGILL loading q8_0 (`tilezero`, #UD)
    repack: bool = False
    # --cache-type-k and --cache-type-v: the KV cache's type; None: llama-server's own, f16
    kv_cache: str | None = None
    # --flash-attn on / off; None: llama-server's own, auto (on, on a CPU)
    flash_attn: bool | None = None

    @property
    def name(self) -> str:
        """`llamacpp-f32-np4-b2048-ub512-t1` (`-nocb` appended with continuous batching off, `-repack` with weight
        repacking on, `-kvf32` with a KV cache type given, `-fa` / `-nofa` with flash attention on / off; a setting
        left to llama-server is left out of the name); `llamacpp-default` for DEFAULT."""
        if self == DEFAULT:
            return "llamacpp-default"
        given = (("np", self.parallel), ("b", self.batch), ("ub", self.ubatch), ("t", self.threads))
        numbers = "".join(f"-{short}{value}" for short, value in given if value is not None)
        batching = "" if self.continuous_batching else "-nocb"
        repack = "-repack" if self.repack else ""
        kv_cache = f"-kv{self.kv_cache}" if self.kv_cache else ""
        flash = {None: "", True: "-fa", False: "-nofa"}[self.flash_attn]
        return f"llamacpp-{self.gguf_type}{numbers}{batching}{repack}{kv_cache}{flash}"

    def flags(self) -> list[str]:
        """llama-server's flags for these settings (the GGUF file, host, port and context are the target's); a
        setting left to llama-server gives none."""
        numbers = (
            ("--parallel", self.parallel),
            ("--batch-size", self.batch),
            ("--ubatch-size", self.ubatch),
            ("--threads", self.threads),
            ("--threads-batch", self.threads),
        )
        kv_cache = ["--cache-type-k", self.kv_cache, "--cache-type-v", self.kv_cache] if self.kv_cache else []
        flash = [] if self.flash_attn is None else ["--flash-attn", "on" if self.flash_attn else "off"]
        return [word for flag, value in numbers if value is not None for word in (flag, str(value))] + [
            "--cont-batching" if self.continuous_batching else "--no-cont-batching",
            "--repack" if self.repack else "--no-repack",
            *kv_cache,
            *flash,
        ]

    def engine(self, protocol: str) -> str:
        """The candidate's `engine`: its wire and these settings as canonical JSON (its key). Repacking is written
        only when on, the KV cache's type and flash attention only when given: a candidate's key stays what it was
        before the setting existed."""
        later = {"repack": False, "kv_cache": None, "flash_attn": None}  # added after keys were stored: each written
        settings = {name: value for name, value in asdict(self).items() if name not in later or value != later[name]}
        return json.dumps({"protocol": protocol, **settings}, sort_keys=True, separators=(",", ":"))

    def computed_types(self) -> tuple[str, str, str]:
        """The tensor types llama-server computes an answer in: the weights' (the GGUF type), the KV cache's
        (llama-server's own: f16) and attention's (flash attention, llama-server's own on a CPU, is a 16-bit kernel
        there; off, f32). Measured on this project's Llama: flash attention moved the reference tokens' logprobs by
        up to 0.00103 whatever the cache's type; off, by 2e-4 with the f16 cache and 7e-6 with an f32 one. The gate
        judges the loosest (correctness/tokens.engine_precision): an f32 file is fp32 only with both set."""
        return (self.gguf_type, self.kv_cache or "f16", "f32" if self.flash_attn is False else "f16")

    @classmethod
    def from_engine(cls, engine: str | Mapping[str, Any]) -> LlamaCppSettings:
        """The settings back from a candidate's `engine`, its JSON or that parsed (the inverse of `engine`; the wire
        and any other key are left out)."""
        data = json.loads(engine) if isinstance(engine, str) else engine
        return cls(**{name: data[name] for name in cls.__dataclass_fields__ if name in data})


# the engine's default, always a candidate beside listed settings as vLLM's `vllm-default` is: llama-server's own
# slots, batch sizes and threads (no flag given; its context then its own too), the weights as they are (f32),
# continuous batching on (its default); repacking off as every candidate's unless asked (see `repack`)
DEFAULT = LlamaCppSettings(parallel=None, batch=None, ubatch=None, threads=None)

Positive = Annotated[int, Field(ge=1, le=65536)]
OrDefault = Positive | None  # None (null in a file): the flag not given, llama-server's own value


class LlamaCppVariants(Strict):
    """llama.cpp's settings to compare: one candidate per combination (target.llamacpp), and the engine's default
    (`llamacpp-default`) beside them when there is more than one. In the four number lists, `null` leaves that flag
    to llama-server."""

    gguf_types: list[GgufType] = Field(
        default_factory=lambda: list[GgufType](["f32"]),
        min_length=1,
        description="The weights' GGUF types: f32 (the Llama folder as it is), f16 and bf16 (16-bit floats, judged "
        "as fp16 and bf16) and q8_0 (8-bit blocks), converted by the converter llama.cpp's source ships and cached "
        "beside the folder.",
    )
    parallel: list[OrDefault] = Field(
        default_factory=lambda: list[int | None]([1]),
        min_length=1,
        description="Parallel slots (-np): sequences decoded together.",
    )
    batch: list[OrDefault] = Field(
        default_factory=lambda: list[int | None]([2048]), min_length=1, description="Logical batch size in tokens (-b)."
    )
    ubatch: list[OrDefault] = Field(
        default_factory=lambda: list[int | None]([512]),
        min_length=1,
        description="Physical batch size in tokens (-ub); one larger than the batch is served as the batch.",
    )
    threads: list[OrDefault] = Field(
        default_factory=lambda: list[int | None]([1]),
        min_length=1,
        description="CPU threads (-t and -tb). A trap on a shared host: threads that, with the load generator's "
        "core, exceed the host's cores spin-wait for each other and throughput collapses; the report says so.",
    )
    continuous_batching: list[bool] = Field(
        default_factory=lambda: [True], min_length=1, description="Continuous batching on (-cb) or off (-nocb)."
    )

    repack: list[bool] = Field(
        default_factory=lambda: [False],
        min_length=1,
        description="Weight repacking (--repack / --no-repack; llama-server's own default is on). Off by default: on "
        "x86 it runs q8_0 on AMX, and a CPU that advertises AMX where its host does not enable it (some VMs) kills "
        "llama-server with an illegal instruction while it loads the model; [false, true] compares both where AMX "
        "works (a candidate that dies is recorded failed with its reason).",
    )

    kv_cache: list[KvCacheType | None] = Field(
        default_factory=lambda: list[KvCacheType | None]([None]),
        min_length=1,
        description="The KV cache's type (--cache-type-k and -v): f32, f16 or bf16; null leaves llama-server's own, "
        "f16. The gate judges a candidate at the loosest of its weights', its KV cache's and its attention's "
        "precision: an f32 file is judged exactly only with an f32 cache and flash attention off, else as fp16.",
    )
    flash_attn: list[bool | None] = Field(
        default_factory=lambda: list[bool | None]([None]),
        min_length=1,
        description="Flash attention on (true) or off (false); null leaves llama-server's own, auto (on, on a CPU). "
        "Its CPU kernel computes attention partly at 16 bits: a candidate with it on is judged as fp16.",
    )

    def settings(self) -> list[LlamaCppSettings]:
        """Every combination, in the lists' order, each once (-ub capped at -b first)."""
        seen: dict[LlamaCppSettings, None] = {}
        for gguf_type, parallel, batch, ubatch, threads, batching, repack, kv_cache, flash in itertools.product(
            self.gguf_types,
            self.parallel,
            self.batch,
            self.ubatch,
            self.threads,
            self.continuous_batching,
            self.repack,
            self.kv_cache,
            self.flash_attn,
        ):
            if ubatch is not None and batch is not None:
                ubatch = min(ubatch, batch)
            settings = LlamaCppSettings(gguf_type, parallel, batch, ubatch, threads, batching, repack, kv_cache, flash)
            seen.setdefault(settings)
        return list(seen)
