"""Where candidates are deployed: the target kinds and their fields."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AliasChoices, Field, model_validator

from recommender.spec.base import NAME_PATTERN, Accelerator, Strict
from recommender.spec.llamacpp import LlamaCppVariants

TargetKind = Literal["local", "docker", "sagemaker", "remote", "infinity", "vllm", "llamacpp"]
# the kinds that start a server of their own for model.source llama (the Llama folder), and generate
LLAMA_SERVERS = ("vllm", "llamacpp")
Protocol = Literal["kserve", "openai", "openai-chat", "openai-completions"]
OPENAI_PROTOCOLS = ("openai", "openai-chat", "openai-completions")  # targets/wire.py OPENAI_WIRES
# targets/wire.py GENERATIVE: the generative wires, what a vllm target speaks
GENERATIVE_PROTOCOLS = ("openai-chat", "openai-completions")
EngineValue = bool | int | float | str
# a vllm engine setting: one value (every candidate's), or a list of values (one candidate per value: a variant)
EngineSetting = EngineValue | Annotated[list[EngineValue], Field(min_length=1)]
KvCacheGib = Annotated[float, Field(gt=0)]
InfinityEngine = Literal["torch", "optimum"]
# target fields that only one kind uses: field -> the kinds it applies to
_KIND_FIELDS = {
    "role_arn": ("sagemaker",),
    "bucket": ("sagemaker",),
    "endpoint_url": ("sagemaker", "remote"),
    "image_uri": ("sagemaker", "docker"),
    "endpoint": ("remote",),
    "gpus": ("docker",),
    "protocol": ("remote", "vllm", "llamacpp"),
    "stream": ("remote", "vllm", "llamacpp"),
    "model": ("remote",),
    "api_key_env": ("remote",),
    "engines": ("infinity",),
    "batch_sizes": ("infinity",),
    "engine_args": ("vllm",),
    "kv_cache_gib": ("vllm",),
    "llamacpp": ("llamacpp",),
}


class TargetSpec(Strict):
    """Where candidates are deployed."""

    name: str | None = Field(
        None,
        min_length=1,
        max_length=60,
        pattern=NAME_PATTERN,
        description="How this target is told apart from the "
        "others of a `targets:` list (default: its instance_type); part of each candidate's key there.",
    )
    kind: TargetKind = Field(
        "local",
        description="local: the tritonserver binary from the nvidia-pytriton wheel, on loopback; "
        "docker: the containers/triton image on this host's Docker engine; sagemaker: real SageMaker endpoints; "
        "remote: an endpoint that already exists (benchmark only, nothing deployed or deleted); "
        "infinity: the Infinity embedding server (infinity-emb, in a virtualenv of its own) on loopback, one "
        "candidate per engine and batch size; vllm: vLLM's OpenAI server (in a virtualenv of its own) on loopback "
        "serving model.source llama, one candidate (its engine_args); llamacpp: llama.cpp's llama-server (built "
        "once into a virtualenv of its own) on loopback serving model.source llama converted to GGUF, one candidate "
        "per combination of its `llamacpp` settings.",
    )
    instance_type: str = Field(
        "local-cpu",
        description="The hardware: a label for local/docker/remote, a SageMaker type (ml.g5.xlarge) for sagemaker.",
    )
    price_per_hour: float = Field(
        0.0,
        ge=0,
        description="What one instance of this hardware costs per hour in USD; 0 (default) means unpriced "
        "(for sagemaker: looked up in the price catalog by instance_type and region).",
    )
    priced_as: str | None = Field(
        None,
        description="Price the local hardware as this catalog instance type (e.g. ml.g5.xlarge) "
        "instead of price_per_hour.",
    )
    region: str = Field("us-east-1", description="Region whose prices are used for priced_as and cloud targets.")
    ready_timeout_seconds: float = Field(
        180, gt=0, description="How long to wait for the model (or the SageMaker endpoint) to become ready."
    )
    endpoint_instance_count: int = Field(
        1,
        ge=1,
        le=100,
        validation_alias=AliasChoices("endpoint_instance_count", "instance_count"),
        description="sagemaker: instances behind each candidate's endpoint while it is measured "
        "(InitialInstanceCount); `instance_count` is accepted as its former name.",
    )
    role_arn: str | None = Field(
        None,
        description="sagemaker: the execution role SageMaker assumes (RoleArn output of infra/cloudformation.yaml).",
    )
    bucket: str | None = Field(
        None, description="sagemaker: S3 bucket for model.tar.gz (BucketName output of infra/cloudformation.yaml)."
    )
    image_uri: str | None = Field(
        None,
        description="sagemaker: the ECR URI of the serving image (containers/triton pushed to ECR); "
        "docker: any image reference (default recommender-triton:24.10).",
    )
    endpoint_url: str | None = Field(
        None, description="sagemaker / remote SageMaker endpoint: AWS API URL override (an emulator or a VPC endpoint)."
    )
    endpoint: str | None = Field(
        None,
        validation_alias=AliasChoices("endpoint", "url"),
        description="remote: a Triton base URL (http://host:8000), sagemaker://ENDPOINT_NAME of an existing "
        "SageMaker endpoint, or with an openai protocol the OpenAI API's base URL (http://host:port/v1: requests go "
        "to <url>/embeddings, <url>/chat/completions or <url>/completions); `url` is accepted as its name too.",
    )
    protocol: Protocol = Field(
        "kserve",
        description="remote: what the endpoint speaks: kserve (Triton's KServe v2 JSON, token ids in), openai "
        "(POST <url>/embeddings with the payload's texts; the gate compares the embeddings by row), or a generative "
        "OpenAI API: openai-chat (POST <url>/chat/completions with messages) or openai-completions (POST "
        "<url>/completions with a prompt), measured per token (TTFT, inter-token latency, tokens/s); vllm: "
        "openai-chat (its default) or openai-completions.",
    )
    stream: bool = Field(
        True,
        description="remote with openai-chat / openai-completions, and vllm: stream the answers (server-sent events, "
        "read chunk by chunk: time to first token and every token's time); false: one JSON answer per request (its "
        "time to first token is then its end-to-end latency).",
    )
    model: str | None = Field(
        None, min_length=1, description="remote with an openai protocol: the served model name sent as `model`."
    )
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="remote with an openai protocol: the NAME of the environment variable that holds the endpoint's "
        "API key (e.g. OPENAI_API_KEY), sent as `Authorization: Bearer <key>` with every request. The key itself is "
        "never written to the experiment file, the store or a log; a run without the variable set stops at preflight.",
    )
    engines: list[InfinityEngine] = Field(
        default_factory=lambda: list[InfinityEngine](["torch"]),
        min_length=1,
        description="infinity: the engines to compare (torch: PyTorch; optimum: ONNX Runtime through optimum), "
        "one candidate per engine and batch size.",
    )
    batch_sizes: list[Annotated[int, Field(ge=1, le=1024)]] = Field(
        default_factory=lambda: [32],
        min_length=1,
        description="infinity: the server's largest batch (--batch-size); it batches waiting requests on its own.",
    )
    engine_args: dict[str, EngineSetting] = Field(
        default_factory=dict,
        description="vllm: the engine's arguments, each passed as its flag ({max_num_seqs: 8} -> --max-num-seqs 8; "
        "true -> --flag, false -> --no-flag); one the installed vLLM does not know is refused before any server "
        "starts. On the CPU the server runs eager (--enforce-eager) unless `enforce_eager: false`. A list of values "
        "({max_num_seqs: [1, 8], enable_chunked_prefill: [true, false]}) makes them variants: one candidate per "
        "combination, plus the engine's default (every listed setting left to vLLM), named for what they set "
        "(vllm-seqs8-nochunk, vllm-default); a combination vLLM would refuse is skipped with vLLM's reason.",
    )
    kv_cache_gib: KvCacheGib | Annotated[list[KvCacheGib], Field(min_length=1)] = Field(
        1.0,
        description="vllm on the CPU: the KV cache's size in GiB (VLLM_CPU_KVCACHE_SPACE; vLLM reads it as a whole "
        "number); a list makes it a variant, the default candidate keeps 1.",
    )
    llamacpp: LlamaCppVariants = Field(
        default_factory=LlamaCppVariants,
        description="llamacpp: the settings to compare (GGUF types, parallel slots, batch and micro-batch sizes, "
        "threads, continuous batching), one candidate per combination.",
    )
    accelerator: Accelerator = Field(
        "auto",
        description="What serves the model: auto (the GPUs when this host has them, detected through NVML, else "
        "the CPU), cpu, or gpu (refused at preflight on a host without one). local/docker detect this host's hardware.",
    )
    gpus: str | None = Field(
        "all", description="docker: value of `docker run --gpus` (all, device=0, ...); null for CPU only."
    )
    budget_usd: float | None = Field(
        None,
        gt=0,
        description="Cloud spending cap in USD: a run whose estimate is above it does not start, "
        "and a run stops and tears down once its spend reaches it.",
    )

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> TargetSpec:
        defaults = {
            name: field.get_default(call_default_factory=True) for name, field in type(self).model_fields.items()
        }
        misplaced = [
            name
            for name, kinds in _KIND_FIELDS.items()
            if self.kind not in kinds and getattr(self, name) not in (None, defaults[name])
        ]
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} not used by target kind {self.kind}")
        if self.kind == "sagemaker":
            missing = [name for name in ("role_arn", "bucket", "image_uri") if not getattr(self, name)]
            if missing:
                raise ValueError(f"target kind sagemaker needs {', '.join(missing)}")
            if not self.instance_type.startswith("ml."):
                raise ValueError(
                    f"instance_type {self.instance_type!r} is not a SageMaker instance type (e.g. ml.g5.xlarge)"
                )
        if self.kind == "remote" and not self.endpoint:
            raise ValueError("target kind remote needs `endpoint` (http://host:port or sagemaker://NAME)")
        if self.kind == "remote" and self.protocol in OPENAI_PROTOCOLS:
            if not self.model:
                raise ValueError(
                    f"target kind remote with protocol {self.protocol} needs `model` (the served model name)"
                )
            if not str(self.endpoint).startswith(("http://", "https://")):
                raise ValueError(f"protocol {self.protocol} needs an http(s):// url, not {self.endpoint!r}")
        if self.kind == "vllm":
            repeated = [
                name for name, values in self.variant_settings.items() if len(set(map(repr, values))) < len(values)
            ]
            if repeated:
                raise ValueError(f"engine setting {repeated[0]} lists a value twice")
        if self.kind in LLAMA_SERVERS:
            if "protocol" not in self.model_fields_set:  # its default wire: streamed chat
                object.__setattr__(self, "protocol", GENERATIVE_PROTOCOLS[0])
            if self.protocol not in GENERATIVE_PROTOCOLS:
                raise ValueError(
                    f"target kind {self.kind} speaks protocol {' or '.join(GENERATIVE_PROTOCOLS)}, not {self.protocol}"
                )
        if self.api_key_env and not (self.kind == "remote" and self.protocol in OPENAI_PROTOCOLS):
            raise ValueError(
                "api_key_env is used by the openai protocols only (Triton and SageMaker endpoints take no key)"
            )
        if not self.stream and self.protocol not in GENERATIVE_PROTOCOLS:
            raise ValueError("stream is used by protocol openai-chat and openai-completions only (they generate)")
        return self

    @property
    def stack(self) -> str:
        """The serving stack: triton, infinity, vllm, llamacpp, or openai (an existing OpenAI-compatible endpoint)."""
        if self.kind in ("infinity", *LLAMA_SERVERS):
            return self.kind
        return "openai" if self.kind == "remote" and self.protocol in OPENAI_PROTOCOLS else "triton"

    @property
    def variant_settings(self) -> dict[str, list[EngineValue]]:
        """vllm: the settings given as lists (engine arguments by name, and `kv_cache_gib`), each with its values."""
        listed: dict[str, list[EngineValue]] = {
            name: list(value) for name, value in self.engine_args.items() if isinstance(value, list)
        }
        if isinstance(self.kv_cache_gib, list):
            listed["kv_cache_gib"] = list(self.kv_cache_gib)
        return listed

    @property
    def generative(self) -> bool:
        """The target's answers are generated tokens (an openai-chat or openai-completions endpoint, vLLM or
        llama.cpp)."""
        return self.kind in LLAMA_SERVERS or (self.kind == "remote" and self.protocol in GENERATIVE_PROTOCOLS)


def target_label(target: TargetSpec) -> str:
    """What tells a target apart in a multi-target experiment: its `name`, else its instance type."""
    return target.name or target.instance_type
