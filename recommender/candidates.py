"""Candidates: the serving-variant grid expanded from a spec, each with a stable key (the resume key)."""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from recommender.metrics.headline import Headline, ServerStats
from recommender.spec import DynamicBatching, ExperimentSpec, TargetSpec, target_label
from recommender.spec.llamacpp import DEFAULT as LLAMACPP_DEFAULT
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.spec.search import IntRange

# The stored configuration's key for `instance_group_count`. It keeps its first name: a candidate's key is a hash of
# its configuration, so renaming the key would give every stored candidate a new key (re-measured, history lost).
INSTANCE_GROUP_KEY = "instance_count"
DEFAULT_PRECISION = "fp32"
DEFAULT_PADDING = "max"  # today's padding: every request at one length (hashed only when another padding is asked)
# optimizations that build a reduced-precision engine; the others serve fp32 only
REDUCED_PRECISION = frozenset({"trt"})
# other serving stacks' candidates (target.stack): Infinity's engines, and an existing OpenAI endpoint as it is
STACK_ENGINES = frozenset({"torch", "optimum"})
OPENAI_AS_IS = "openai-endpoint"
VLLM = "vllm"  # a vllm target's candidates (their engine arguments: `engine`)
LLAMACPP = "llamacpp"  # a llamacpp target's candidates: one per combination of its settings (`engine`)
# the generative engines: each batches continuously on its own (Triton's dynamic batching settings do not apply;
# a candidate's max batch size is the engine's sequences / slots)
GENERATIVE_ENGINES = frozenset({VLLM, LLAMACPP})
ENGINE_VARIANT = "variant"  # in a vLLM variant's engine JSON: its name (`seqs8-chunk`, `default`); no engine argument
DEFAULT_KV_CACHE_GIB = 1.0  # the vllm target's KV cache when kv_cache_gib is not one value (spec.target's default)
# short names of vLLM's settings in a variant's name: on/off switches (chunk / nochunk), dtypes, the rest
_SWITCH_NAMES = {"enable_chunked_prefill": "chunk", "enable_prefix_caching": "pc", "enforce_eager": "eager"}
_DTYPE_NAMES = {"bfloat16": "bf16", "float32": "fp32", "float": "fp32", "float16": "fp16", "half": "fp16"}
_SETTING_NAMES = {
    "max_num_seqs": "seqs",
    "max_num_batched_tokens": "tok",
    "gpu_memory_utilization": "gmu",
    "tensor_parallel_size": "tp",
    "quantization": "q-",
    "max_model_len": "len",
}


def named_as_variant(optimization: str) -> bool:
    """A candidate of this optimization is named `pt-db-ig2-mbs8` (a Triton variant of the grid), not for a stack's
    engine (`torch-mbs32`) or as the endpoint it is (`openai-endpoint`)."""
    return optimization not in STACK_ENGINES and optimization not in (OPENAI_AS_IS, VLLM, LLAMACPP)


@dataclass(frozen=True)
class Candidate:
    """One serving configuration of one model on one target instance type."""

    optimization: str
    dynamic_batching: DynamicBatching | None
    instance_group_count: int  # Triton instance_group count: model instances inside one server
    max_batch_size: int
    instance_type: str
    model_fingerprint: str = field(default="", compare=True)
    precision: str = "fp32"  # fp16: TensorRT engines only; left out of config() at its default (stored keys stay valid)
    target: str = ""  # a multi-target experiment's target label (spec target_label); "" with one target (not hashed)
    padding: str = "max"  # how requests are padded (load/payload.py); left out of config() at "max" (keys stay valid)
    # a stack's engine configuration as canonical JSON (vllm: its wire, KV cache and engine arguments), so another
    # configuration is another key; left out of config() when "" (every other candidate's key stays as it was)
    engine: str = ""

    @property
    def name(self) -> str:
        """Short human name, e.g. `pt-db-ig2-mbs8` (db = dynamic batching on, nodb = off; a padding other than max
        is a suffix: `pt-db-ig2-mbs8-buckets`); another stack's candidate is named for its engine and batch size
        (`torch-mbs32`) or as the endpoint it is (`openai-endpoint`)."""
        on = f"@{self.target}" if self.target else ""
        if self.optimization in STACK_ENGINES:
            return f"{self.optimization}-mbs{self.max_batch_size}{on}"
        if self.optimization == LLAMACPP:  # its settings: llamacpp-f32-np4-b2048-ub512-t1
            return f"{LlamaCppSettings.from_engine(self.engine).name}{on}"
        if not named_as_variant(self.optimization):
            variant = json.loads(self.engine).get(ENGINE_VARIANT) if self.engine else None
            return f"{self.optimization}{'-' + variant if variant else ''}{on}"
        batching = "db" if self.dynamic_batching is not None else "nodb"
        precision = "" if self.precision == DEFAULT_PRECISION else f"-{self.precision}"
        padding = "" if self.padding == DEFAULT_PADDING else f"-{self.padding}"
        grid = f"{batching}-ig{self.instance_group_count}-mbs{self.max_batch_size}{padding}"
        return f"{self.optimization}{precision}-{grid}{on}"

    def config(self) -> dict:
        """The serving configuration as plain data (stored, shown, hashed); the instance-group count is stored as
        INSTANCE_GROUP_KEY."""
        data = asdict(self)
        data[INSTANCE_GROUP_KEY] = data.pop("instance_group_count")
        data["dynamic_batching"] = self.dynamic_batching.model_dump() if self.dynamic_batching else None
        if data["precision"] == DEFAULT_PRECISION:  # added after keys were stored: only a non-default value is hashed
            del data["precision"]
        if not data["target"]:  # added with multi-target experiments: a single-target key stays as it was
            del data["target"]
        if data["padding"] == DEFAULT_PADDING:  # added with variants.padding: a max candidate's key stays as it was
            del data["padding"]
        if not data["engine"]:  # added with the vllm target: no other candidate has one
            del data["engine"]
        return data

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Candidate:
        """The candidate back from its stored configuration (the inverse of `config()`)."""
        batching = config.get("dynamic_batching")
        return cls(
            optimization=config["optimization"],
            dynamic_batching=DynamicBatching(**batching) if batching is not None else None,
            instance_group_count=config[INSTANCE_GROUP_KEY],
            max_batch_size=config["max_batch_size"],
            instance_type=config["instance_type"],
            model_fingerprint=config.get("model_fingerprint", ""),
            precision=config.get("precision", DEFAULT_PRECISION),
            target=config.get("target", ""),
            padding=config.get("padding", DEFAULT_PADDING),
            engine=config.get("engine", ""),
        )

    @property
    def key(self) -> str:
        """Stable hash of the canonical configuration: same configuration, same key, across runs and hosts."""
        canonical = json.dumps(self.config(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]


class RunStatus(StrEnum):
    """What became of a run (stored as these strings). Final: every status but RUNNING and PENDING."""

    RUNNING = "running"  # started, not finished (or its process died: the lease says which)
    OK = "ok"  # measured
    FAILED = "failed"  # could not be measured: the reason says why
    SKIPPED = "skipped"  # not attempted (an engine missing, a budget, max_candidates): the reason says why
    INTERRUPTED = "interrupted"  # stopped by Ctrl-C, SIGTERM or the budget while measuring
    INCORRECT = "incorrect"  # outputs outside the correctness tolerances: measured no further, never ranked
    PRUNED = "pruned"  # adaptive search stopped it after its probe: partial figures, the reason says why
    PENDING = "pending"  # a candidate of the experiment with no run under the current protocol yet


@dataclass(frozen=True)
class CandidateResult:
    """A candidate with its latest run (for the current measurement protocol)."""

    key: str
    name: str
    config: dict[str, Any]
    status: RunStatus
    reason: str | None
    headline: Headline | None
    server_stats: dict[str, Any] | None
    run_id: int | None
    duration_s: float | None
    finished_at: datetime | None
    protocol_key: str | None = None  # the measurement protocol of the run (or of the reads, for a pending one)
    # what the run served on (accelerator, CPU, GPUs); None before migration 0005
    hardware: dict[str, Any] | None = None
    backend: str | None = None  # what served it, e.g. python:onnxruntime or onnxruntime_onnx
    correctness: dict[str, Any] | None = None  # the correctness gate's stored figures (correctness/gate.py Correctness)
    budget_skipped: bool = False  # the budget refused or stopped it (migration 0007): a raised budget measures it
    payload: dict[str, Any] | None = None  # what it was sent (metrics/payload_lengths.py); None before migration 0008

    @property
    def server(self) -> ServerStats:
        """The server-side figures of the run, read by name (empty when the run stored none)."""
        return ServerStats.from_dict(self.server_stats)


def instance_group_count_of(config: Mapping[str, Any]) -> int | None:
    """The Triton instance-group count in a stored configuration (None when the configuration has none)."""
    return config.get(INSTANCE_GROUP_KEY)


def model_fingerprint(spec: ExperimentSpec) -> str:
    """Hash of what determines the served model and its inputs (model source and payload shape)."""
    data = {"model": spec.model.model_dump(mode="json"), "sequence_length": spec.payload.sequence_length}
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


def expand_candidates(spec: ExperimentSpec) -> list[Candidate]:
    """Every valid combination of the grid on every target (each variant on all targets, then the next variant), in
    a stable order, without duplicates. With one target a candidate carries no target label (its key as before)."""
    grid = spec.variants
    fingerprint = model_fingerprint(spec)
    labels = [target_label(t) if spec.multi_target else "" for t in spec.all_targets]
    tritons = [(t, label) for t, label in zip(spec.all_targets, labels, strict=True) if t.stack == "triton"]
    seen: dict[str, Candidate] = {}
    for opt, precision, batching, count, mbs, padding in itertools.product(
        grid.optimizations,
        grid.precisions,
        grid.dynamic_batching,
        grid.values("instance_group_counts"),
        grid.values("max_batch_sizes"),
        grid.padding,
    ):
        if precision != DEFAULT_PRECISION and opt not in REDUCED_PRECISION:
            continue
        settings = _batching_settings(batching, mbs)
        for target, label in tritons:
            candidate = Candidate(
                opt, settings, count, mbs, target.instance_type, fingerprint, precision, label, padding
            )
            seen.setdefault(candidate.key, candidate)
    for target, label in zip(spec.all_targets, labels, strict=True):
        for candidate in stack_candidates(target, fingerprint, label):
            seen.setdefault(candidate.key, candidate)
    return list(seen.values())


def stack_candidates(target: TargetSpec, fingerprint: str, label: str) -> list[Candidate]:
    """A serving stack's own candidates (the variant grid is Triton's): Infinity's engines x batch sizes (it batches
    waiting requests by itself: dynamic batching on, its defaults); vLLM's one fixed configuration (it batches up to
    max_num_seqs sequences, the candidate's max batch size; 0 where the engine's default is left); an existing OpenAI
    endpoint as it is (one)."""
    if target.stack == "infinity":
        return [
            Candidate(engine, DynamicBatching(), 1, size, target.instance_type, fingerprint, target=label)
            for engine in target.engines
            for size in target.batch_sizes
        ]
    if target.stack == "vllm":
        return vllm_candidates(target, fingerprint, label)
    if target.stack == "llamacpp":
        return llamacpp_candidates(target, fingerprint, label)
    if target.stack == "openai":
        return [Candidate(OPENAI_AS_IS, None, 1, 1, target.instance_type, fingerprint, target=label)]
    return []


def vllm_candidates(target: TargetSpec, fingerprint: str, label: str) -> list[Candidate]:
    """vLLM's candidates: the target's one configuration (its key as it always was) when no setting is a list;
    else one per combination of the listed values (named for them: `vllm-seqs8-chunk`), and first the engine's
    default (`vllm-default`: every listed setting left to vLLM, the KV cache at its 1 GiB), which is always
    measured. A single value is every candidate's. max_num_seqs is the candidate's max batch size (0: vLLM's)."""
    fixed = {name: value for name, value in target.engine_args.items() if not isinstance(value, list)}
    listed = target.variant_settings
    kv = target.kv_cache_gib if not isinstance(target.kv_cache_gib, list) else DEFAULT_KV_CACHE_GIB
    if not listed:
        return [_vllm_candidate(target, fingerprint, label, {"kv_cache_gib": kv, **fixed})]
    combinations = [dict(zip(listed, values, strict=True)) for values in itertools.product(*listed.values())]
    default = {"kv_cache_gib": kv, **fixed, ENGINE_VARIANT: "default"}
    return [_vllm_candidate(target, fingerprint, label, default)] + [
        _vllm_candidate(
            target, fingerprint, label, {"kv_cache_gib": kv, **fixed, **chosen, ENGINE_VARIANT: variant_name(chosen)}
        )
        for chosen in combinations
    ]


def _vllm_candidate(target: TargetSpec, fingerprint: str, label: str, settings: dict[str, Any]) -> Candidate:
    engine = {"protocol": target.protocol, **settings}
    sequences = settings.get("max_num_seqs", 0)
    return Candidate(
        VLLM,
        DynamicBatching(),
        1,
        sequences if isinstance(sequences, int) and not isinstance(sequences, bool) else 0,
        target.instance_type,
        fingerprint,
        target=label,
        engine=json.dumps(engine, sort_keys=True, separators=(",", ":")),
    )


def variant_name(chosen: Mapping[str, Any]) -> str:
    """A vLLM variant's name from its listed settings, in their order: `seqs8-chunk-pc`, `bf16-kv2g`; a setting
    without a short name is written `<name><value>`."""
    parts = []
    for name, value in chosen.items():
        if isinstance(value, bool) and name in _SWITCH_NAMES:
            parts.append(_SWITCH_NAMES[name] if value else "no" + _SWITCH_NAMES[name])
        elif name == "dtype":
            parts.append(_DTYPE_NAMES.get(str(value), str(value)))
        elif name == "kv_cache_gib":
            parts.append(f"kv{value:g}g")
        else:
            shown = str(value).lower() if isinstance(value, bool) else str(value)
            parts.append(f"{_SETTING_NAMES.get(name, name.replace('_', ''))}{shown}")
    return "-".join(parts)


def engine_settings(config: Mapping[str, Any]) -> dict[str, Any]:
    """A vLLM candidate's engine settings from its stored configuration: the engine arguments and kv_cache_gib
    (without the wire and the variant's name); {} for a candidate of another stack."""
    engine = json.loads(config.get("engine") or "{}")
    return {name: value for name, value in engine.items() if name not in ("protocol", ENGINE_VARIANT)}


def llamacpp_candidates(target: TargetSpec, fingerprint: str, label: str) -> list[Candidate]:
    """llama.cpp's candidates: one per combination of its settings (spec/llamacpp.py), and first, when there is more
    than one, the engine's default (`llamacpp-default`: llama-server's own slots, batch sizes and threads), which is
    always measured, as vLLM's; its parallel slots are the candidate's max batch size (the sequences it decodes
    together; 0 where llama-server's own is left), its settings and wire its `engine`."""
    combinations = target.llamacpp.settings()
    if len(combinations) > 1 and LLAMACPP_DEFAULT not in combinations:
        combinations = [LLAMACPP_DEFAULT, *combinations]
    return [
        Candidate(
            LLAMACPP,
            DynamicBatching(),
            1,
            settings.parallel or 0,
            target.instance_type,
            fingerprint,
            target=label,
            engine=settings.engine(target.protocol),
        )
        for settings in combinations
    ]


def target_index(spec: ExperimentSpec, candidate: Candidate) -> int:
    """Which of spec.all_targets a candidate runs on (0 for a single-target experiment)."""
    if not candidate.target:
        return 0
    return [target_label(t) for t in spec.all_targets].index(candidate.target)


def _batching_settings(choice: bool | DynamicBatching, max_batch_size: int) -> DynamicBatching | None:
    """Normalise a grid entry: False -> None, True -> defaults; preferred sizes above max_batch_size are dropped."""
    if choice is False:
        return None
    settings = DynamicBatching() if choice is True else choice
    if isinstance(settings.preferred_batch_size, IntRange):  # adaptive search: the sampler picks a size later
        return settings
    preferred = [size for size in settings.preferred_batch_size if size <= max_batch_size]
    return settings.model_copy(update={"preferred_batch_size": preferred})
