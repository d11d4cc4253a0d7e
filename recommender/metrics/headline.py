"""The headline of one measured run: the typed record the measurement produces and every reader uses.

    measurement -> Measured + levels.decide(windows, limits) -> Headline.join(measured, figures)
        -> store (flat JSON via to_dict) -> Headline.from_dict -> .measured
        -> levels.decide(stored windows, the decision's limits) -> Headline.join -> decide, CLI, report, dashboard

Two parts: `Measured` (requests, failures, stop reasons, flags, window counts, repeats, stop limits) is what the
run measured, kept whatever the limits; `Figures` (verdict, MaxInvocations, ModelLatency, intervals, stability,
the limits) is computed at decision time from the stored windows. `Headline` is the two joined in one flat record:
what the store keeps (its JSON shape is unchanged) and what every reader reads.

One record, read by attribute: no reader digs in a dictionary with fallbacks. `from_dict` is the one place that
knows older stored shapes (rows written before a field existed get its documented default).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from recommender.metrics.generation import GenerationFigures
from recommender.metrics.intervals import Interval
from recommender.metrics.limits import Limits
from recommender.metrics.server_figures import SERVER_PARTS
from recommender.metrics.stability import Stability
from recommender.vocabulary import DEFAULT_PERCENTILE, PERCENTILE_NAMES


@dataclass(frozen=True)
class ChosenWindow:
    """The steady-state window one repeat's MaxInvocations came from."""

    phase_index: int
    window_index: int
    start_s: float
    end_s: float
    samples: int  # successful requests in the window: the percentile's sample count


@dataclass(frozen=True)
class WindowCount:
    """How many steady-state windows were measured over all repeats, how many were stable, and their length."""

    seconds: float | None = None
    measured: int = 0
    stable: int = 0  # windows whose phase, in their repeat, passed the stability rule
    chosen: tuple[ChosenWindow | None, ...] = ()  # rows stored before levels: one single-best window per repeat
    at_level: int = 0  # windows (all repeats) of the level the headline's figures come from

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> WindowCount:
        data = data or {}
        chosen = tuple(None if c is None else ChosenWindow(**c) for c in data.get("chosen") or ())
        return cls(
            data.get("seconds"),
            int(data.get("measured") or 0),
            int(data.get("stable") or 0),
            chosen,
            int(data.get("at_level") or 0),
        )


@dataclass(frozen=True)
class Measured:
    """What the repeats measured, whatever the limits: stored with the run and never re-decided."""

    repeats: int = 1
    requests: int = 0  # every request sent, all repeats
    failures: int = 0  # every failed request, all repeats
    stop_reason: str | None = None  # the first repeat's reason to stop early (None: the traffic ran to its end)
    stop_reasons: tuple[str | None, ...] = ()
    flags: tuple[str, ...] = ()
    windows: WindowCount = field(default_factory=WindowCount)
    stop_limits: Limits | None = None  # the limits the load's latency / error stop conditions used when measured
    from_top_stop: float | None = None  # from the top down (until_known.from_top): the load of the level the walk
    # stopped at, which met the limits it was measured with; the levels below it were not measured
    most_repeats: int | None = None  # the most repeats its stopping rule allowed (None: stored before it was kept)
    window_looks: int = 1  # measured until known: the most looks a level's stopping rule had (its intervals' K)
    repeat_looks: int = 1  # measured until known over repeats: the looks the repeats' stopping rule had
    known_levels: tuple[int, ...] = ()  # level (phase) indices a repeat ended early because known (until_known)

    def complete(self, repeats: int) -> bool:
        """Measured in full for work that asks for up to `repeats` repeats: its repeats ended by their stopping rule
        (all of them run, or known over repeats earlier) under a cap of at least `repeats` (docs/design.md
        "Definitions": complete). A count alone is not the test: a measurement known at 3 of 5 repeats is complete.
        Rows stored before the cap was kept: complete when they have the repeats."""
        return self.repeats >= repeats or (self.most_repeats or 0) >= repeats


@dataclass(frozen=True)
class Figures:
    """What a decision computes from the stored windows under its limits (metrics/levels.py `decide`).

    The limits are spread as `percentile` / `threshold_ms` / `max_error_rate` (the stored shape; the last two are None
    for rows stored before they were recorded): `under(limits, ...)` builds it, `limits` reads them back.
    `max_invocations` is MaxInvocations: the mean IPM over the windows (all repeats) of the highest load level that
    meets the limits (None when none does); `invocations_per_minute` is the figure shown for the run either way
    (MaxInvocations, or the lowest level's mean for an excluded one). `latency_ms` holds every percentile at that
    level; `model_latency_ms` the decision percentile's (ModelLatency). Intervals say what their n counts.
    """

    percentile: str = DEFAULT_PERCENTILE
    threshold_ms: float | None = None
    max_error_rate: float | None = None
    invocations_per_minute: float = 0.0
    max_invocations: float | None = None
    latency_ms: Mapping[str, float | None] = field(default_factory=dict)
    model_latency_ms: float | None = None
    error_rate: float = 0.0
    within_threshold: bool = False
    stable: bool | None = None  # None: not judged (rows stored before stability existed)
    ipm_interval: Interval | None = None
    latency_interval: Interval | None = None
    samples: int = 0  # successful requests in the level's windows, all repeats (what the percentiles rest on)
    phase_index: int | None = None
    notes: tuple[str, ...] = ()
    level_load: float | None = None  # offered load of the level shown: users (closed loop) or requests per second
    repeats_breached: int = 0  # repeats whose own windows at that level breach the limits (or never reached it)
    stability: Stability | None = None  # the stability rule's numbers at that level
    generation: GenerationFigures | None = None  # a generative run's figures at that level (metrics/generation.py)
    breached_below: tuple[float, ...] = ()  # loads of the levels below the chosen one that breach the limits

    @classmethod
    def under(cls, limits: Limits, **decided: Any) -> Figures:
        """The figures decided under `limits`."""
        return cls(limits.percentile, limits.threshold_ms, limits.max_error_rate, **decided)

    @property
    def limits(self) -> Limits | None:
        """The limits these figures were decided under (None for rows stored before they were recorded)."""
        if self.threshold_ms is None or self.max_error_rate is None:
            return None
        return Limits(self.percentile, self.threshold_ms, self.max_error_rate)

    @property
    def objective(self) -> float | None:
        """What a search ranks the run on, per minute of one instance: a generative run's goodput x 60 (requests/min
        within every SLO, at the highest level meeting them), else MaxInvocations; None when no level met them."""
        goodput = self.generation.value("goodput") if self.generation is not None else None
        if self.max_invocations is None or goodput is None:
            return self.max_invocations
        return goodput * 60

    @property
    def objective_interval(self) -> Interval | None:
        """The interval of `objective` (goodput's x 60, or MaxInvocations')."""
        goodput = self.generation.interval("goodput") if self.generation is not None else None
        if self.max_invocations is None or goodput is None:
            return self.ipm_interval
        return replace(goodput, mean=goodput.mean * 60, low=goodput.low * 60, high=goodput.high * 60)


@dataclass(frozen=True)
class Headline(Figures, Measured):
    """What a run measured, as the user decides on it (docs/design.md "Definitions"), under its decision's limits:
    the fields of `Measured` and of `Figures` in one flat record (the store's JSON shape). `join` builds it from the
    two parts; `measured` gives the measured part back for a decision under other limits. The number of windows at
    the level shown is decided too; it is kept in `windows.at_level` (where the store has it).
    """

    @classmethod
    def join(cls, measured: Measured, figures: Figures, at_level: int = 0) -> Headline:
        """The headline of a run: what it measured, with the figures a decision computed (one flat record)."""
        decided = {f.name: getattr(figures, f.name) for f in fields(Figures)}
        kept = {f.name: getattr(measured, f.name) for f in fields(Measured) if f.name != "windows"}
        return cls(**kept, **decided, windows=replace(measured.windows, at_level=at_level))

    @property
    def measured(self) -> Measured:
        """The measured part (what a decision under other limits keeps; `windows.at_level` is decided, not kept)."""
        kept = {f.name: getattr(self, f.name) for f in fields(Measured) if f.name != "windows"}
        return Measured(**kept, windows=replace(self.windows, at_level=0))

    def latency(self, percentile: str) -> float | None:
        """Latency at `percentile` at the headline point (ms), None when not measured."""
        return self.latency_ms.get(percentile)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (what the store keeps)."""
        data = asdict(self)
        data["latency_ms"] = dict(self.latency_ms)
        for name in ("stop_reasons", "notes", "flags", "known_levels", "breached_below"):
            data[name] = list(data[name])
        data["windows"]["chosen"] = list(data["windows"]["chosen"])
        data["generation"] = self.generation.to_dict() if self.generation else None
        data["stop_limits"] = self.stop_limits.to_dict() if self.stop_limits else None
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Headline | None:
        """The record from stored JSON (None for a run without a headline); older rows get the field defaults.

        Rows stored before MaxInvocations existed held only `invocations_per_minute` and `latency_ms`: within the
        threshold those were MaxInvocations and ModelLatency, so they are read as such (else None, as today).
        """
        if not data:
            return None
        latency = dict(data.get("latency_ms") or {})
        percentile = data.get("percentile") or DEFAULT_PERCENTILE
        within = bool(data.get("within_threshold", False))
        legacy = "max_invocations" not in data and within
        return cls(
            percentile=percentile,
            invocations_per_minute=float(data.get("invocations_per_minute") or 0.0),
            max_invocations=data.get("invocations_per_minute") if legacy else data.get("max_invocations"),
            latency_ms={name: latency.get(name) for name in PERCENTILE_NAMES},
            model_latency_ms=latency.get(percentile) if legacy else data.get("model_latency_ms"),
            error_rate=float(data.get("error_rate") or 0.0),
            within_threshold=within,
            stable=data.get("stable"),
            ipm_interval=Interval.from_dict(data.get("ipm_interval")),
            latency_interval=Interval.from_dict(data.get("latency_interval")),
            repeats=int(data.get("repeats") or 1),
            samples=int(data.get("samples") or 0),
            requests=int(data.get("requests") or 0),
            failures=int(data.get("failures") or 0),
            phase_index=data.get("phase_index"),
            stop_reason=data.get("stop_reason"),
            stop_reasons=tuple(data.get("stop_reasons") or ()),
            notes=tuple(data.get("notes") or ()),
            flags=tuple(data.get("flags") or ()),
            windows=WindowCount.from_dict(data.get("windows")),
            threshold_ms=data.get("threshold_ms"),
            max_error_rate=data.get("max_error_rate"),
            level_load=data.get("level_load"),
            repeats_breached=int(data.get("repeats_breached") or 0),
            stability=Stability.from_dict(data.get("stability")),
            stop_limits=Limits.from_dict(data.get("stop_limits")),
            from_top_stop=data.get("from_top_stop"),
            most_repeats=data.get("most_repeats"),
            window_looks=int(data.get("window_looks") or 1),
            repeat_looks=int(data.get("repeat_looks") or 1),
            known_levels=tuple(data.get("known_levels") or ()),
            generation=GenerationFigures.from_dict(data.get("generation")),
            breached_below=tuple(float(load) for load in data.get("breached_below") or ()),
        )


@dataclass(frozen=True)
class ServerStats:
    """The server side of a run, read by name from the stored `Run.server_stats` JSON (kept as a dict).

    Run-wide Triton statistics deltas (`avg_batch_size`, `execution_count`, `avg_us` by part) and the figures of
    the window MaxInvocations came from (`at_max_invocations`: `queue_us`, `compute_*_us`, `avg_batch_size`, ...).
    The Prometheus, GPU and CloudWatch records stay in the dict: nothing reads them back yet.
    """

    avg_batch_size: float | None = None
    execution_count: int | None = None
    avg_us: Mapping[str, float | None] = field(default_factory=dict)
    at_max_invocations: Mapping[str, Any] = field(default_factory=dict)
    stages: Mapping[str, float] = field(default_factory=dict)  # seconds per stage of the run (metrics/stage_times)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> ServerStats:
        data = data or {}
        return cls(
            data.get("avg_batch_size"),
            data.get("execution_count"),
            dict(data.get("avg_us") or {}),
            dict(data.get("at_max_invocations") or {}),
            dict(data.get("stages") or {}),
        )

    def batch_size(self) -> float | None:
        """Inferences per model execution at MaxInvocations when measured there, else over the run."""
        return self.at_max_invocations.get("avg_batch_size") or self.avg_batch_size

    def time_per_request_us(self) -> dict[str, float | None]:
        """Average server time per request by part, at MaxInvocations when measured there, else over the run."""
        at = self.at_max_invocations
        if "queue_us" in at:
            return {part: at.get(f"{part}_us") for part in SERVER_PARTS}
        return {part: self.avg_us.get(part) for part in SERVER_PARTS}
