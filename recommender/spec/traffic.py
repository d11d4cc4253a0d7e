"""The load driven at every candidate: one shape (phases, stairs, concurrency, rate), windows, stability, stopping,
repeats."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_serializer, model_validator

from recommender.files.trace import MAX_RATE
from recommender.spec.base import Strict


class Phase(Strict):
    """One traffic phase with SageMaker semantics (InitialNumberOfUsers, SpawnRate, DurationInSeconds)."""

    initial_users: int = Field(1, ge=1, description="Users at the start of the phase.")
    spawn_rate: float = Field(0, ge=0, description="Users added per minute during the phase.")
    duration_seconds: float = Field(60, gt=0, le=7200, description="Length of the phase in seconds.")


class Stairs(Strict):
    """SageMaker STAIRS: `number_of_steps` steps, each `users_per_step` users more than the last, each held for
    `duration_seconds`."""

    users_per_step: int = Field(
        ..., ge=1, description="Users added at every step (step k runs k x users_per_step users)."
    )
    number_of_steps: int = Field(..., ge=1, le=100, description="How many steps.")
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each step lasts, in seconds.")


class Concurrency(Strict):
    """Fixed concurrency levels run one after another (closed loop: each user sends, waits for the answer, sends
    again)."""

    users: list[Annotated[int, Field(ge=1, le=10000)]] = Field(
        ..., min_length=1, description="User counts, one level each, in order."
    )
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each level lasts, in seconds.")


class OpenLoop(Strict):
    """What every open-loop shape shares: the sender pool and when a send counts as late."""

    max_concurrency: int = Field(
        64,
        ge=1,
        le=10000,
        description="Requests that may be in flight at once; a send finding "
        "none free goes out late (and is counted late).",
    )
    late_ms: float = Field(
        1.0, ge=0, description="A send more than this many ms after its scheduled time counts as late."
    )
    max_late_share: float = Field(
        0.01,
        ge=0,
        le=1,
        description="A level with a larger share of late sends is flagged (the "
        "generator or the server could not keep to the schedule).",
    )


_RequestsPerSecond = Annotated[float, Field(gt=0, le=MAX_RATE)]  # MAX_RATE: the generator's ceiling


class Rate(OpenLoop):
    """Open loop: requests are sent on a schedule whatever the server does; latency is timed from the SCHEDULED send."""

    requests_per_second: _RequestsPerSecond | list[_RequestsPerSecond] = Field(
        ..., description="Arrival rate, or a list of rates run one after another (one level each)."
    )
    arrival: Literal["constant", "poisson", "gamma"] = Field(
        "constant",
        description="constant: evenly spaced sends; poisson: exponential gaps; gamma: gamma gaps whose coefficient of "
        "variation is `cv` (bursty arrivals above 1, Poisson at 1).",
    )
    cv: float | None = Field(
        None,
        gt=0,
        le=10,
        description="gamma only (and required there): the coefficient of variation of the gaps between sends, "
        "their standard deviation over their mean (constant: 0, Poisson: 1; 2 to 4: bursty).",
    )
    seed: int = Field(0, ge=0, description="Random seed of the Poisson or gamma schedule (same seed, same schedule).")
    duration_seconds: float = Field(..., gt=0, le=7200, description="How long each rate level lasts, in seconds.")

    @model_validator(mode="after")
    def _cv_with_gamma(self) -> Rate:
        if self.arrival == "gamma" and self.cv is None:
            raise ValueError("arrival gamma needs `cv`, the coefficient of variation of its gaps (e.g. cv: 2)")
        if self.arrival != "gamma" and self.cv is not None:
            raise ValueError(f"cv applies to arrival gamma only; arrival {self.arrival} has its own (drop cv)")
        return self

    @model_serializer(mode="wrap")
    def _omit_cv_unset(self, handler: Any) -> dict[str, Any]:
        """No `cv` (constant, poisson) is the rate stored before gamma existed: left out, so those keys stay valid."""
        data = handler(self)
        if data.get("cv") is None:
            data.pop("cv", None)
        return data

    @property
    def rates(self) -> list[float]:
        return (
            list(self.requests_per_second) if isinstance(self.requests_per_second, list) else [self.requests_per_second]
        )

    @field_validator("requests_per_second")
    @classmethod
    def _not_empty(cls, value: Any) -> Any:
        if isinstance(value, list) and not value:
            raise ValueError("give at least one rate")
        return value


class Trace(OpenLoop):
    """Open loop: the requests of a trace file replayed at their timestamps (files/trace.py says the format), sped up
    by `speedup`; latency is timed from the scheduled send, as for `rate`."""

    file: Path = Field(
        ...,
        description="seconds: request timestamps in seconds, one request a line, each optionally followed by "
        "`,INDEX`: the request's index into the payload's requests; mooncake: JSON lines "
        '{"timestamp": ms, "input_length": n, "output_length": m} (relative paths: from the experiment file\'s '
        "folder).",
    )
    format: Literal["seconds", "mooncake"] = Field(
        "seconds",
        description="seconds: timestamps (and payload indices) as text; mooncake: a Mooncake-style JSONL trace of a "
        "generative endpoint, each request sent a synthetic prompt of its row's input and output lengths "
        "(payload.generation's tokenizer and seed; hash_ids are ignored).",
    )
    speedup: float = Field(
        1.0, gt=0, le=1000, description="Replay this many times faster than recorded (0.5: twice as slow)."
    )

    @model_serializer(mode="wrap")
    def _omit_seconds(self, handler: Any) -> dict[str, Any]:
        """The `seconds` format is the trace stored before mooncake existed: left out, so those keys stay valid."""
        data = handler(self)
        if data.get("format") == "seconds":
            data.pop("format")
        return data


class StabilityRule(Strict):
    """When a load level counts as stable (README "Stable"): at least `windows` windows, the level means of IPM and of
    the percentile latency known within `tolerance` (relative standard error), and no significant trend across them."""

    windows: int = Field(
        4,
        ge=2,
        le=20,
        description="Fewest steady-state windows a level needs to be judged stable; "
        "also how many consecutive windows the latency and error-rate stop conditions look at.",
    )
    tolerance: float = Field(
        0.05,
        gt=0,
        le=1,
        description="Largest relative standard error s / sqrt(n) / mean of a "
        "level's mean IPM and mean percentile latency over its windows (0.05: the 95 % interval of the mean is then at "
        "most +- t x 5 %: +-16 % over 4 windows, +-11 % over 12 windows).",
    )
    ipm_tolerance: float | None = Field(
        None,
        gt=0,
        le=1,
        description="DEPRECATED (the former rule: every window within "
        "this share of the mean): when `tolerance` is not given it becomes the smaller "
        "of ipm_tolerance and latency_tolerance, halved.",
    )
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

    latency: bool = Field(
        True,
        description="Stop when `stability.windows` consecutive windows breach `latency_threshold` "
        "(the one set at measure time; a run stopped there is reused at any threshold, and above it says so).",
    )
    error_rate: bool = Field(
        True, description="Stop when the last `stability.windows` windows together fail more than `max_error_rate`."
    )
    max_invocations: float | None = Field(
        None, gt=0, description="Stop once a window reaches this many invocations per minute."
    )
    flat_invocations: bool = Field(
        False,
        description="Stop when throughput stops growing while the load grows: a level's mean IPM "
        "is within `flat_tolerance` of the previous level's although it has more users (or a higher rate).",
    )
    flat_tolerance: float = Field(
        0.05, ge=0, le=1, description="Growth below this share counts as flat (0.05 = less than 5 %)."
    )


class UntilKnown(Strict):
    """Measure until known: each load level ends as soon as its figures are known this well (README "Definitions":
    sequential stopping, corrected for the repeated looks), at its planned duration otherwise, flagged "precision not
    reached"; the repeats stop the same way once the interval over repeat means is this narrow."""

    relative_half_width: float = Field(
        0.05,
        gt=0,
        le=1,
        description="The 95 % interval of MaxInvocations and of the latency percentile must be within +- this share "
        "of the mean (0.05 = +-5 %), corrected for the looks taken.",
    )
    min_windows: int = Field(
        4, ge=2, le=1000, description="The fewest steady-state windows a level is judged on before it may end."
    )
    from_top: bool = Field(
        False,
        description="Levels run from the highest load down, and the first repeat stops at the first level that meets "
        "the limits: MaxInvocations is the highest level within them, so no level below can change it. The other "
        "repeats measure that level only. The levels below are not measured (no latency curve under it); a stricter "
        "threshold that the level breaches says so when re-ranked.",
    )

    @model_serializer(mode="wrap")
    def _omit_from_top_off(self, handler: Any) -> dict[str, Any]:
        """`from_top` off is the protocol stored before it existed: left out, so those measurement keys stay valid."""
        data = handler(self)
        if not data.get("from_top"):
            data.pop("from_top", None)
        return data


class TrafficSpec(Strict):
    """The load driven at every candidate: exactly one of `phases`, `stairs`, `concurrency`, `rate` (phases by
    default)."""

    phases: list[Phase] | None = Field(
        None, min_length=1, description="Phases run one after another (default: one phase of 1 user for 60 s)."
    )
    stairs: Stairs | None = Field(None, description="SageMaker STAIRS: more users at every step.")
    concurrency: Concurrency | None = Field(None, description="Fixed user counts, one level each.")
    rate: Rate | None = Field(None, description="Open-loop arrivals at fixed rates (constant, Poisson or gamma).")
    trace: Trace | None = Field(None, description="Open-loop replay of a trace file's request timestamps.")
    warmup_seconds: float = Field(
        5, ge=0, description="Excluded from the measured windows at the start of each phase (capped at half the phase)."
    )
    window_seconds: float = Field(
        5, gt=0, le=600, description="Length of the fixed steady-state windows a phase is measured in."
    )
    stability: StabilityRule = Field(default_factory=StabilityRule, description="When a load level counts as stable.")
    stopping: Stopping = Field(default_factory=Stopping, description="When to stop the load early.")
    until_known: UntilKnown | bool | None = Field(
        None,
        description="Measure until known: each level runs as a load run of its own and ends once its figures are "
        "within `relative_half_width` (its planned duration is the most it gets; `repeats` is the most repeats). "
        "true or a mapping: on; false: every level runs its planned duration and every repeat runs. Absent: on "
        "for `concurrency` and `rate` levels and under `search: adaptive`, off for `phases` and `stairs` "
        "(SageMaker's fixed phases).",
    )
    request_encoding: Literal["json", "binary"] = Field(
        "json",
        description="How KServe v2 requests carry their token ids: json (the `data` lists) or binary (the binary "
        "tensor extension real Triton clients send by default: a JSON header, then raw little-endian INT64; answers "
        "stay JSON). Triton parses binary tensors with less CPU, which the dynamic batcher can notice. Targets that "
        "take text (Infinity, an OpenAI endpoint) and SageMaker endpoints take json only.",
    )
    workers: Annotated[int, Field(ge=1, le=256)] | Literal["auto"] = Field(
        1,
        description="Load generator processes on "
        "this host: 1 = one Locust process; N > 1 = Locust's distributed mode (one master, N workers, "
        "records merged on the master's clock); auto = enough that none exceeds 60 % of a core at the "
        "rate measured by the previous repeat (the first repeat: cores - 1), never more than cores - 1.",
    )
    generator_cpus: list[Annotated[int, Field(ge=0)]] | None = Field(
        None,
        min_length=1,
        description="CPUs the load "
        "generator is pinned to (the local target's server gets the others). None: isolate only on a "
        "host with 4 or more CPUs (the generator gets the last quarter); [] is not allowed.",
    )
    remote_workers: int = Field(
        0,
        ge=0,
        le=1024,
        description="Locust workers expected from other hosts (started "
        "there with `recommender worker --master HOST:PORT`); the run waits for them (and the "
        "local ones) up to `worker_wait_seconds`. Needs `master_bind` reachable from those hosts.",
    )
    master_bind: str = Field(
        "127.0.0.1",
        min_length=1,
        description="Address the Locust master binds to. 127.0.0.1 "
        "(default): only workers on this host can join. 0.0.0.0 or this host's address lets "
        "remote workers join; anyone who can reach that port can then join the run.",
    )
    master_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description="TCP port of the Locust master. None: an "
        "OS-chosen free port without remote workers, 5557 (Locust's default) with them.",
    )
    worker_wait_seconds: float = Field(
        60,
        gt=0,
        le=3600,
        description="How long a run waits for all expected workers "
        "(local + remote) to join before it fails with a message naming them.",
    )
    repeats: int = Field(
        1,
        ge=1,
        le=20,
        description="Measure each candidate this many times (fresh load runs on the same deployment); "
        "3 or more give 95 % intervals over the repeats' level means; with 1 or 2 the interval is over the level's "
        "windows (3 or more), window-to-window noise only, labelled so.",
    )

    @field_validator("master_bind")
    @classmethod
    def _an_address(cls, value: str) -> str:
        try:
            ipaddress.ip_address(value)
        except ValueError:
            raise ValueError(
                f"{value!r} is not an IP address: use 127.0.0.1 (this host only), 0.0.0.0 (every "
                "interface) or one of this host's addresses"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_shape(self) -> TrafficSpec:
        given = [name for name in SHAPES if getattr(self, name) is not None]
        if len(given) > 1:
            raise ValueError(f"give only one traffic shape, not {' and '.join(given)}")
        if not given:
            object.__setattr__(self, "phases", [Phase()])
        if self.until_known is True:
            object.__setattr__(self, "until_known", UntilKnown())
        if isinstance(self.until_known, UntilKnown) and not self.rampless:
            raise ValueError(self._ramps())
        if self.trace is not None and self.remote_workers:
            raise ValueError(
                "trace: a trace is replayed by this host's generator processes (they read the trace file); "
                "set remote_workers to 0"
            )
        return self

    @property
    def rampless(self) -> bool:
        """Every level holds its load from start to end (no stairs, no phase with spawn_rate > 0)."""
        return self.shape != "stairs" and not any(p.spawn_rate for p in self.phases or ())

    @property
    def open_loop(self) -> OpenLoop | None:
        """The open-loop settings (rate or trace; None: closed loop)."""
        return self.rate or self.trace

    @property
    def known(self) -> UntilKnown | None:
        """The measure-until-known settings in force (None: fixed durations)."""
        return self.until_known if isinstance(self.until_known, UntilKnown) else None

    def _ramps(self) -> str:
        if self.until_known is not None and self.shape == "stairs":
            return "until_known: stairs ramp from one step to the next; use `concurrency` levels instead"
        return "until_known: a phase with spawn_rate > 0 ramps; give each level as a phase with spawn_rate 0"

    @model_serializer(mode="wrap")
    def _omit_generator_defaults(self, handler: Any) -> dict[str, Any]:
        """The generator's distribution settings at their defaults (today's single process) are left out, so measurement
        keys stored before
        these settings existed stay valid (protocol.py hashes this dump)."""
        data = handler(self)
        for name, default in (
            ("workers", 1),
            ("generator_cpus", None),
            ("remote_workers", 0),
            ("master_bind", "127.0.0.1"),
            ("master_port", None),
            ("worker_wait_seconds", 60),
            ("until_known", None),
            ("trace", None),
            ("request_encoding", "json"),
        ):
            if data.get(name, default) == default:
                data.pop(name, None)
        if data.get("until_known") is False:  # off is the fixed protocol, stored before this setting existed
            data.pop("until_known")
        return data

    @property
    def shape(self) -> str:
        """Which shape this traffic uses: phases | stairs | concurrency | rate | trace."""
        return next(name for name in SHAPES if getattr(self, name) is not None)


SHAPES = ("phases", "stairs", "concurrency", "rate", "trace")
