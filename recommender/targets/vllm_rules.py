"""vLLM's own refusals of an engine configuration, checked before any server starts: a vLLM variant that the engine
would reject at start is skipped with vLLM's reason, as a TensorRT candidate without TensorRT is.

    refusal({"max_num_batched_tokens": 512, "enable_chunked_prefill": False}, gpus=None, context=4096)
        -> "vLLM 0.32.0 refuses it: max_num_batched_tokens (512) is smaller than max_model_len (4096) ..."

Each rule is vLLM 0.32's, read in its source (site-packages/vllm), not guessed:
- dtype: `ModelDType` in vllm/config/model.py (auto, half, float16, bfloat16, float, float32); every one of them
  runs on an x86 or aarch64 CPU (platforms/cpu.py `supported_dtypes`: bf16, fp16 and fp32), so float16 on the CPU
  is not refused; bfloat16 needs a GPU of compute capability 8.0 (platforms/cuda.py), which NVML does not tell us
  here, so vLLM says so at start (the candidate fails with its log).
- max_num_batched_tokens: smaller than max_model_len without chunked prefill, or smaller than max_num_seqs
  (SchedulerConfig.verify_max_model_len in vllm/config/scheduler.py); a setting left to vLLM takes its CPU default
  (EngineArgs.get_batch_defaults, the OpenAI server's: 2048 and 128 sequences per world-size rank; an unset
  max_num_batched_tokens is raised to max_model_len without chunked prefill and capped at max_num_seqs x
  max_model_len), and chunked prefill is on by default for a Llama. On a GPU the defaults depend on its memory, so
  the rules are applied there only to settings given.
- gpu_memory_utilization: above 0 and at most 1 (CacheConfig in vllm/config/cache.py).
- tensor_parallel_size x pipeline_parallel_size: at most the GPUs the candidate is given (ParallelConfig in
  vllm/config/parallel.py: "World size (n) is larger than the number of available GPUs"); the attention heads
  divisible by it (ModelConfig.verify_with_parallel_config).
- max_model_len: at most the model's max_position_embeddings (ModelConfig's _get_and_verify_max_len; the built
  Llama sets no model_max_length, and VLLM_ALLOW_LONG_MAX_MODEL_LEN is not set).
- kv_cache_gib: VLLM_CPU_KVCACHE_SPACE is read with int() (platforms/cpu.py): a fraction of a GiB stops the server.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from recommender.targets.vllm_venv import VERSION

DTYPES = ("auto", "half", "float16", "bfloat16", "float", "float32")  # vllm/config/model.py ModelDType
# the numeric settings these rules read, as vLLM's parser types them (kv_cache_gib: our float, VLLM_CPU_KVCACHE_SPACE)
NUMBERS = {
    "max_num_seqs": int,
    "max_num_batched_tokens": int,
    "tensor_parallel_size": int,
    "pipeline_parallel_size": int,
    "gpu_memory_utilization": float,
    "kv_cache_gib": float,
}
CPU_BATCHED_TOKENS, CPU_SEQUENCES = 2048, 128  # get_batch_defaults on the CPU, OPENAI_API_SERVER, per rank


def refusal(engine: Mapping[str, Any], gpus: int | None, context: int, heads: int | None = None) -> str | None:
    """Why vLLM would refuse this engine configuration (its settings and kv_cache_gib), or None. `gpus`: the GPUs the
    candidate is given, None on the CPU; `context`: the model's max_position_embeddings (max_model_len's default);
    `heads`: its attention heads."""
    typed = _typed(engine)
    if isinstance(typed, str):
        return f"vLLM {VERSION} refuses it: {typed}"
    length = typed.get("max_model_len", context)
    known = isinstance(length, int) and not isinstance(length, bool)  # else vLLM's own forms ("1k"): not judged here
    reason = (
        _dtype(typed)
        or _parallel(typed, gpus, heads)
        or _memory(typed, gpus)
        or (_length(length, context) or _scheduler(typed, gpus is None, length) if known else None)
    )
    return f"vLLM {VERSION} refuses it: {reason}" if reason else None


def _typed(engine: Mapping[str, Any]) -> dict[str, Any] | str:
    """The settings with their numbers as numbers (as vLLM's argument parser reads the flag's text), or its refusal:
    `argument --max-num-seqs: invalid int value: 'x'`, or a number below its least (the config's `ge=1`)."""
    typed = dict(engine)
    for name, kind in NUMBERS.items():
        value = engine.get(name)
        if value is None:
            continue
        try:
            number = kind(str(value)) if not isinstance(value, bool) else None
        except ValueError:
            number = None
        if number is None:
            return f"argument --{name.replace('_', '-')}: invalid {kind.__name__} value: {str(value)!r}"
        if kind is int and number < 1:
            return f"{name}: Input should be greater than or equal to 1 (given {number})"
        typed[name] = number
    return typed


def _dtype(engine: Mapping[str, Any]) -> str | None:
    dtype = engine.get("dtype", "auto")
    if str(dtype).lower() not in DTYPES:
        return f"Unknown dtype: {dtype!r} (dtype is one of {', '.join(DTYPES)})"
    return None


def _parallel(engine: Mapping[str, Any], gpus: int | None, heads: int | None) -> str | None:
    tensor = int(engine.get("tensor_parallel_size", 1))
    world = int(engine.get("pipeline_parallel_size", 1)) * tensor
    if gpus is not None and world > gpus:
        return f"World size ({world}) is larger than the number of available GPUs ({gpus}) in this node"
    if heads is not None and heads % tensor:
        return f"Total number of attention heads ({heads}) must be divisible by tensor parallel size ({tensor})"
    return None


def _memory(engine: Mapping[str, Any], gpus: int | None) -> str | None:
    share = engine.get("gpu_memory_utilization")
    if share is not None and not 0 < float(share) <= 1:
        return f"gpu_memory_utilization ({share}) must be above 0 and at most 1"
    kv = engine.get("kv_cache_gib")
    if gpus is None and kv is not None and float(kv) != int(float(kv)):
        return (
            f"VLLM_CPU_KVCACHE_SPACE is read with int(): invalid literal for int() with base 10: '{float(kv):g}' "
            "(kv_cache_gib: a whole number of GiB)"
        )
    return None


def _length(asked: int, context: int) -> str | None:
    if asked > context:  # model_max_length: the built Llama's config.json sets none
        return (
            f"User-specified max_model_len ({asked}) is greater than the derived max_model_len "
            f"(max_position_embeddings={context} or model_max_length=None in model's config.json)."
        )
    return None


def _scheduler(engine: Mapping[str, Any], cpu: bool, max_model_len: int) -> str | None:
    chunked = bool(engine.get("enable_chunked_prefill", True))
    world = int(engine.get("pipeline_parallel_size", 1)) * int(engine.get("tensor_parallel_size", 1))
    sequences = engine.get("max_num_seqs", CPU_SEQUENCES * world if cpu else None)
    tokens = engine.get("max_num_batched_tokens")
    if tokens is None and cpu and sequences is not None:  # _set_default_max_num_seqs_and_batched_tokens_args
        tokens = CPU_BATCHED_TOKENS * world
        tokens = min(int(sequences) * max_model_len, tokens if chunked else max(max_model_len, tokens))
    if tokens is None:
        return None
    if int(tokens) < max_model_len and not chunked:
        return (
            f"max_num_batched_tokens ({tokens}) is smaller than max_model_len ({max_model_len}). This effectively "
            "limits the maximum sequence length to max_num_batched_tokens and makes vLLM reject longer sequences. "
            "Please increase max_num_batched_tokens or decrease max_model_len."
        )
    if sequences is not None and int(tokens) < int(sequences):
        return f"max_num_batched_tokens ({tokens}) must be greater than or equal to max_num_seqs ({sequences})."
    return None
