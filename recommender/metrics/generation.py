"""A window's generation figures, from the streamed requests completed in it (docs/design.md "Generation").

    RequestLog (generative) -> window_generation(log, start, end) -> WindowGeneration (stored per window, JSON)
        -> levels.decide -> level_generation(level, slo) -> GenerationFigures at the level shown

Per request (AIPerf's names where the meaning is the same; README "Definitions"):
- TTFT: the first content chunk, from the send (`ttft_us`);
- ITL, AIPerf's `inter_token_latency`: (end-to-end - TTFT) / (output tokens - 1), requests with 2 tokens or more;
- end-to-end: the request's latency (`latency_us`);
- output tokens/s per user: the tokens after the first over (end-to-end - TTFT), both summed over the requests
  with a decode time above 0 (and at a level over its windows: `_per_user`).
Per window: TTFT and ITL percentiles over its successful requests, their output and input tokens, and the per-request
TTFT / ITL / end-to-end of at most KEPT_REQUESTS of them (evenly spaced), so that a decision under any SLO can count
the requests that met it (goodput) without a new run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from recommender.metrics.intervals import Interval
from recommender.metrics.records import RequestLog
from recommender.metrics.summary import completions_between, percentile_ms
from recommender.vocabulary import PERCENTILE_NAMES, PERCENTILES

if TYPE_CHECKING:
    from recommender.metrics.headline import Measured
    from recommender.metrics.levels import Level, WindowRecord
    from recommender.metrics.limits import SloTerm

KEPT_REQUESTS = 1000  # per-request figures a window keeps for goodput at decision time (JSON: ~30 kB a window)
SLO_METRICS = ("ttft", "itl", "e2e")  # what an SLO term bounds (per request, in ms)
# rates of counted things (requests, tokens): an interval at least one count per window wide (per-user speed is a mean)
COUNTED_RATES = frozenset({"goodput", "request_throughput", "output_tps", "input_tps"})


@dataclass(frozen=True)
class KeptRequests:
    """Per-request figures (ms) of a window's successful requests, or an even sample of them; ITL None: 1 token."""

    ttft_ms: tuple[float, ...] = ()
    itl_ms: tuple[float | None, ...] = ()
    e2e_ms: tuple[float, ...] = ()

    def met(self, terms: tuple[SloTerm, ...]) -> int:
        """How many kept requests met every term (each request's own figure within the term's threshold)."""
        columns = {"ttft": self.ttft_ms, "itl": self.itl_ms, "e2e": self.e2e_ms}
        return sum(
            all(_within(columns[t.metric][row], t.threshold_ms) for t in terms) for row in range(len(self.e2e_ms))
        )


@dataclass(frozen=True)
class WindowGeneration:
    """One window's generation figures: token totals, TTFT / ITL percentiles, per-user speed, kept requests."""

    seconds: float
    requests: int  # successful requests completed in the window
    output_tokens: int
    input_tokens: int | None  # None: no request's prompt tokens are known
    ttft_ms: Mapping[str, float | None]
    itl_ms: Mapping[str, float | None]
    # the tokens after the first over the seconds they took (end-to-end - TTFT), summed over the requests: 1 / the
    # token-weighted ITL; a mean of per-request rates would be ruled by answers that came in one burst (decode ~ 0)
    per_user_tps: float | None
    kept: KeptRequests = field(default_factory=KeptRequests)
    # per_user_tps's two sums, so a level pools them over its windows as a window does over its requests (None: a
    # window stored before they were kept)
    decode_tokens: int | None = None
    decode_seconds: float | None = None

    @property
    def output_tps(self) -> float:
        """Output tokens/s of the instance: the window's output tokens over its seconds."""
        return self.output_tokens / self.seconds

    @property
    def input_tps(self) -> float | None:
        return None if self.input_tokens is None else self.input_tokens / self.seconds

    @property
    def request_throughput(self) -> float:
        return self.requests / self.seconds

    def goodput(self, terms: tuple[SloTerm, ...]) -> float:
        """Requests/s that met every term: the kept requests' share that met them, times the window's requests/s."""
        kept = len(self.kept.e2e_ms)
        return self.kept.met(terms) / kept * self.request_throughput if kept else 0.0

    def percentile(self, metric: str, name: str) -> float | None:
        """The window's `metric` (ttft, itl) at percentile `name`, ms."""
        return {"ttft": self.ttft_ms, "itl": self.itl_ms}[metric].get(name)

    def to_dict(self) -> dict[str, Any]:
        return {
            "seconds": self.seconds,
            "requests": self.requests,
            "output_tokens": self.output_tokens,
            "input_tokens": self.input_tokens,
            "ttft_ms": dict(self.ttft_ms),
            "itl_ms": dict(self.itl_ms),
            "per_user_tps": self.per_user_tps,
            "kept": {name: list(getattr(self.kept, name)) for name in ("ttft_ms", "itl_ms", "e2e_ms")},
            "decode_tokens": self.decode_tokens,
            "decode_seconds": self.decode_seconds,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> WindowGeneration | None:
        if not data:
            return None
        kept = data.get("kept") or {}
        return cls(
            float(data["seconds"]),
            int(data["requests"]),
            int(data["output_tokens"]),
            data.get("input_tokens"),
            {name: (data.get("ttft_ms") or {}).get(name) for name in PERCENTILE_NAMES},
            {name: (data.get("itl_ms") or {}).get(name) for name in PERCENTILE_NAMES},
            data.get("per_user_tps"),
            KeptRequests(*(tuple(kept.get(name) or ()) for name in ("ttft_ms", "itl_ms", "e2e_ms"))),
            data.get("decode_tokens"),
            data.get("decode_seconds"),
        )


def window_generation(log: RequestLog, start: float, end: float) -> WindowGeneration | None:
    """The generation figures of the successful requests completed in [start, end); None for a log without tokens."""
    if not log.generative:
        return None
    done = completions_between(log, start, end)
    if done.ttft_us is None or done.output_tokens is None or done.input_tokens is None:
        return None
    good = done.ok & (done.ttft_us >= 0)  # a successful answer streamed a token (the wire's rule; -1: none came)
    e2e = done.latency_us[good].astype(np.float64)
    ttft = done.ttft_us[good].astype(np.float64)
    tokens = done.output_tokens[good].astype(np.int64)
    given = done.input_tokens[good]
    decode = e2e - ttft
    itl = np.where(tokens >= 2, decode / np.maximum(tokens - 1, 1), np.nan)
    streamed = (tokens >= 2) & (decode > 0)  # per-user speed: the tokens after the first over the time they took
    decode_s = float(decode[streamed].sum()) / 1e6
    decode_tokens = int((tokens[streamed] - 1).sum())
    known_input = given[given >= 0]
    return WindowGeneration(
        seconds=max(end - start, 1e-9),
        requests=len(e2e),
        output_tokens=int(tokens.sum()),
        input_tokens=int(known_input.sum()) if len(known_input) else None,
        ttft_ms={name: percentile_ms(ttft, name) for name in PERCENTILES},
        itl_ms={name: percentile_ms(itl[~np.isnan(itl)], name) for name in PERCENTILES},
        per_user_tps=decode_tokens / decode_s if decode_s > 0 else None,
        kept=_kept(ttft, itl, e2e),
        decode_tokens=decode_tokens,
        decode_seconds=decode_s,
    )


def _kept(ttft_us: np.ndarray, itl_us: np.ndarray, e2e_us: np.ndarray) -> KeptRequests:
    """At most KEPT_REQUESTS requests' figures in ms, evenly spaced over the window (all of them when fewer)."""
    rows = np.unique(np.linspace(0, len(e2e_us) - 1, min(len(e2e_us), KEPT_REQUESTS)).round().astype(int))
    return KeptRequests(
        tuple(float(v) / 1000 for v in ttft_us[rows]),
        tuple(None if np.isnan(v) else float(v) / 1000 for v in itl_us[rows]),
        tuple(float(v) / 1000 for v in e2e_us[rows]),
    )


def _within(value: float | None, threshold_ms: float) -> bool:
    """A request's figure within a term's threshold (a request with no ITL, one token, has none to breach)."""
    return value is None or value <= threshold_ms


def term_value(window: WindowRecord, term: SloTerm) -> float | None:
    """A window's figure for one SLO term: its percentile of the term's metric (end-to-end: the window's latency)."""
    if term.metric == "e2e":
        return window.latency(term.percentile)
    return window.generation.percentile(term.metric, term.percentile) if window.generation else None


@dataclass(frozen=True)
class GenerationFigure:
    """One figure at a level: the mean over its windows, and its interval by the interval rule (None: n/a)."""

    value: float
    interval: Interval | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "interval": self.interval.to_dict() if self.interval else None}


@dataclass(frozen=True)
class GenerationFigures:
    """A level's generation figures by name: `ttft_ms.p95`, `itl_ms.p50`, `e2e_ms.p99`, `output_tps`,
    `output_tps_per_user`, `request_throughput`, `goodput`, `input_tps`; a figure no window has is left out."""

    figures: Mapping[str, GenerationFigure] = field(default_factory=dict)

    def value(self, name: str) -> float | None:
        figure = self.figures.get(name)
        return None if figure is None else figure.value

    def interval(self, name: str) -> Interval | None:
        figure = self.figures.get(name)
        return None if figure is None else figure.interval

    def to_dict(self) -> dict[str, Any]:
        return {name: figure.to_dict() for name, figure in self.figures.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> GenerationFigures | None:
        if not data:
            return None
        return cls(
            {
                name: GenerationFigure(float(raw["value"]), Interval.from_dict(raw.get("interval")))
                for name, raw in data.items()
            }
        )


WindowFigure = Callable[["WindowGeneration", "WindowRecord"], "float | None"]


def level_figures(terms: tuple[SloTerm, ...]) -> dict[str, WindowFigure]:
    """Each generation figure's value in one window (its generation and its record), by name."""
    percentiles: dict[str, WindowFigure] = {
        f"{metric}_ms.{name}": _percentile_of(metric, name) for metric in SLO_METRICS for name in PERCENTILE_NAMES
    }
    return percentiles | {
        "output_tps": lambda g, w: g.output_tps,
        "output_tps_per_user": lambda g, w: g.per_user_tps,
        "request_throughput": lambda g, w: g.request_throughput,
        "goodput": lambda g, w: g.goodput(terms),
        "input_tps": lambda g, w: g.input_tps,
    }


def level_generation(
    level: Level, terms: tuple[SloTerm, ...], measured: Measured, ms_resolution: float
) -> GenerationFigures | None:
    """The level's generation figures (None when its windows have none): every figure with its interval and n. An
    interval is never narrower than the measurement's resolution (README "Definitions"): +- `ms_resolution` for a
    latency, one request (or one token) per window for a rate per second."""
    seconds = max((w.generation.seconds for w in level.windows if w.generation), default=0.0)
    if not seconds:
        return None
    per_window = 1 / seconds  # one request or one token in the longest window, per second: the finest step
    figures = {
        name: _figure(
            level, value, measured, ms_resolution if "_ms." in name else _resolution(name, ms_resolution, per_window)
        )
        for name, value in level_figures(terms).items()
    }
    figures["output_tps_per_user"] = _per_user(level, measured) or figures["output_tps_per_user"]
    return GenerationFigures({name: figure for name, figure in figures.items() if figure is not None})


def _per_user(level: Level, measured: Measured) -> GenerationFigure | None:
    """Output tokens/s per user at the level: its windows' decode tokens over their decode seconds, summed (a mean
    of window rates would be ruled by a window whose few answers came in one burst, as a mean of request rates would
    within a window). Its interval is the interval rule on each window's linearised share of the ratio, R + (tokens -
    R x seconds) / the mean seconds (the delta method for a ratio of sums: their mean is R). None when a window
    with a per-user figure was stored without its sums (the mean of window rates is kept for those)."""
    streamed = [g for w in level.windows if (g := w.generation) is not None and g.per_user_tps is not None]
    if not streamed or any(g.decode_tokens is None or not g.decode_seconds for g in streamed):
        return None
    tokens = sum(g.decode_tokens or 0 for g in streamed)
    seconds = sum(g.decode_seconds or 0.0 for g in streamed)
    ratio, mean_seconds = tokens / seconds, seconds / len(streamed)

    def share(w: WindowRecord) -> float | None:
        g = w.generation
        if g is None or g.per_user_tps is None or g.decode_tokens is None or not g.decode_seconds:
            return None
        return ratio + (g.decode_tokens - ratio * g.decode_seconds) / mean_seconds

    return GenerationFigure(ratio, level.interval(share, 0.0, measured))


def _resolution(name: str, ms_resolution: float, per_window: float) -> float:
    if "_ms." in name:
        return ms_resolution
    return per_window if name in COUNTED_RATES else 0.0


def _percentile_of(metric: str, name: str) -> WindowFigure:
    if metric == "e2e":
        return lambda g, w: w.latency(name)
    return lambda g, w: g.percentile(metric, name)


def _figure(level: Level, value: WindowFigure, measured: Measured, resolution: float) -> GenerationFigure | None:
    """One figure over the level's windows that have it: their mean and its interval."""

    def of(w: WindowRecord) -> float | None:
        return None if w.generation is None else value(w.generation, w)

    known = [v for w in level.windows if (v := of(w)) is not None]
    if not known:
        return None
    return GenerationFigure(sum(known) / len(known), level.interval(of, resolution, measured))
