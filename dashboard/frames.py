"""Tables for the pages: stored results laid out as pandas DataFrames (presentation only, no formulas)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

import pandas as pd

from recommender.candidates import CandidateResult, RunStatus
from recommender.metrics.generation import level_generation
from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval
from recommender.metrics.levels import LATENCY_RESOLUTION_MS, Level, WindowRecord, judge_levels
from recommender.metrics.limits import Limits
from recommender.metrics.payload_lengths import PayloadLengths, input_tokens_per_second
from recommender.metrics.rules import WindowRules
from recommender.metrics.server_figures import SERVER_PARTS
from recommender.metrics.stability import describe
from recommender.report.columns import (
    AVG_BATCH_SIZE,
    ERROR_RATE,
    GOODPUT,
    INPUT_TOKENS,
    INVOCATIONS,
    MAX_INVOCATIONS,
    MODEL_LATENCY,
    OUTPUT_TPS,
    OUTPUT_TPS_PER_USER,
    Metric,
)
from recommender.store.results import ExperimentInfo
from recommender.vocabulary import PERCENTILE_NAMES


def first_line(text: str | None, limit: int = 200) -> str:
    return "" if not text else text.strip().splitlines()[0][:limit]


def status_counts(results: Iterable[CandidateResult]) -> Counter:
    return Counter(r.status for r in results)


def experiments_table(infos: list[ExperimentInfo], results_of) -> pd.DataFrame:
    """One row per experiment: status, dates, total measured time and candidate counts by status."""
    rows = []
    for info in infos:
        results = results_of(info.name)
        counts = status_counts(results)
        rows.append(
            {
                "experiment": info.name,
                "status": info.status,
                "created": info.created_at,
                "updated": info.updated_at,
                "measured time (s)": sum(r.duration_s or 0.0 for r in results),
                "candidates": len(results),
                "ok": counts[RunStatus.OK],
                "failed": counts[RunStatus.FAILED] + counts[RunStatus.INTERRUPTED],
                "skipped": counts[RunStatus.SKIPPED],
                "pruned": counts[RunStatus.PRUNED],
                "pending": counts[RunStatus.PENDING] + counts[RunStatus.RUNNING],
            }
        )
    return pd.DataFrame(rows)


def candidates_table(results: list[CandidateResult]) -> pd.DataFrame:
    """One row per candidate: its configuration, run status, reason, duration and headline figures."""
    return pd.DataFrame([candidate_row(r) for r in results])


def candidate_row(r: CandidateResult) -> dict[str, Any]:
    h = r.headline
    row = {
        "configuration": r.name,
        "status": r.status,
        "reason": first_line(r.reason),
        "duration (s)": r.duration_s,
        "finished": r.finished_at,
    }
    if h is None:
        return row | dict.fromkeys([INVOCATIONS.frame, *_percentile_columns(), ERROR_RATE.frame, "within threshold"])
    row |= {
        INVOCATIONS.frame: h.invocations_per_minute,
        **{label: h.latency(p) for p, label in zip(PERCENTILE_NAMES, _percentile_columns(), strict=True)},
        ERROR_RATE.frame: h.error_rate,
        "within threshold": h.within_threshold,
        MAX_INVOCATIONS.frame: h.max_invocations,
        "stable": h.stable,
        "stop reason": h.stop_reason,
    }
    if h.notes:
        row["notes"] = "; ".join(map(str, h.notes))
    return row


def _percentile_columns() -> list[str]:
    """'p50 ms', 'p90 ms', ...: the latency columns, in the terminal's short header for the model latency."""
    return [MODEL_LATENCY.short.format(p=p) for p in PERCENTILE_NAMES]


def _figure(h: Headline, metric: Metric) -> Any:
    """The headline's value of a metric (the catalog's `headline` accessor)."""
    return getattr(h, metric.headline)


def metrics_table(results: list[CandidateResult]) -> pd.DataFrame:
    """Metrics side by side: one column per candidate, one row per figure (headline and server statistics)."""
    columns = {}
    for r in results:
        s = r.server
        columns[r.name] = {
            "status": r.status,
            **headline_figures(r.headline),
            **token_figures(r),
            AVG_BATCH_SIZE.frame: s.avg_batch_size,
            "executions": s.execution_count,
            **{f"server {part} us": s.avg_us.get(part) for part in SERVER_PARTS},
            "reason": first_line(r.reason),
        }
    frame = pd.DataFrame(columns)
    return frame.dropna(how="all").map(text_cell)  # one column mixes figures and words: show all as text


def token_figures(r: CandidateResult) -> dict[str, Any]:
    """Input tokens per request (the payload's mean) and per second at MaxInvocations (None: not recorded)."""
    payload = PayloadLengths.from_dict(r.payload)
    mean = payload.mean_tokens if payload is not None else None
    ipm = r.headline.max_invocations if r.headline is not None else None
    return {"input tokens per request": mean, INPUT_TOKENS.frame: input_tokens_per_second(ipm, mean)}


def headline_figures(h: Headline | None) -> dict[str, Any]:
    """The headline's rows of the Compare table (all None for a run without a headline)."""
    if h is None:
        return dict.fromkeys(headline_figures(Headline()))
    return {
        **{m.frame: _figure(h, m) for m in (INVOCATIONS, MAX_INVOCATIONS)},
        **{f"{p} latency ms": h.latency(p) for p in PERCENTILE_NAMES},
        **{m.frame: _figure(h, m) for m in (MODEL_LATENCY, ERROR_RATE)},
        "requests": h.requests,
        "failures": h.failures,
        "within threshold": h.within_threshold,
        "stable": h.stable,
        "stop reason": h.stop_reason,
        "ipm interval": interval_text(h.ipm_interval),
        "latency interval": interval_text(h.latency_interval),
        "repeats": h.repeats,
        "repeats breached": h.repeats_breached if h.stability else None,
        "level load": h.level_load,
        "percentile samples": h.samples if h.stability else None,
        "stability": describe(h.stability, h.percentile) if h.stability else None,
    }


def config_difference(results: list[CandidateResult]) -> pd.DataFrame:
    """Configuration settings as rows, candidates as columns; `differs` marks the settings that are not all equal."""
    names = sorted({key for r in results for key in r.config})
    rows = {}
    for key in names:
        values = [text_cell(r.config.get(key)) for r in results]
        rows[key] = dict(zip([r.name for r in results], values, strict=False)) | {"differs": len(set(values)) > 1}
    return pd.DataFrame(rows).T


def interval_text(interval: Interval | None) -> str | None:
    """'low to high (n=3 repeats)' (what n counts said); None when absent."""
    if interval is None:
        return None
    return f"{text_cell(interval.low)} to {text_cell(interval.high)} ({interval.label})"


def levels_frame(result: CandidateResult, levels: Iterable[Level], percentile: str) -> pd.DataFrame:
    """One row per load level of a run: its pooled figures, verdict, repeats' verdicts and the stability numbers."""
    rows = [
        {
            "configuration": result.name,
            "load": v.load,
            "windows (n)": len(v.windows),
            INVOCATIONS.frame: v.ipm,
            MODEL_LATENCY.short.format(p=percentile): v.latency(percentile),
            ERROR_RATE.frame: v.error_rate,
            "meets limits": v.meets,
            "repeats breached": f"{v.breached} of {v.repeats}",
            "SE IPM": v.stability.ipm.relative_se,
            f"SE {percentile}": v.stability.latency.relative_se,
            "slope t IPM": v.stability.ipm.slope_t,
            f"slope t {percentile}": v.stability.latency.slope_t,
            "stable": v.stability.stable,
            "why": v.why_not or v.stability.reason,
        }
        for v in levels
    ]
    return pd.DataFrame(rows)


def levels_table(
    results: Iterable[CandidateResult],
    windows_of: Callable[[int], list[WindowRecord]],
    limits: Limits,
    rules: WindowRules = WindowRules(),
) -> pd.DataFrame:
    """Every load level of the measured runs (all repeats pooled, judged under `limits`), one table: the figures
    the decision reads (metrics.levels), each run's windows read through `windows_of(run_id)`."""
    tables = [
        levels_frame(r, judge_levels(windows_of(r.run_id), r.headline.repeats, limits, rules), limits.percentile)
        for r in results
        if r.status == RunStatus.OK and r.headline and r.run_id
    ]
    return pd.concat(tables, ignore_index=True) if tables else pd.DataFrame()


def generation_levels(
    results: Iterable[CandidateResult], windows_of: Callable[[int], list[WindowRecord]], limits: Limits
) -> pd.DataFrame:
    """One row per load level of the generative runs (all repeats pooled, judged under `limits`, SLO terms
    included): output tokens/s per user and per instance (the catalog's frame labels), and whether it meets them."""
    rows = []
    for result in results:
        if result.status != RunStatus.OK or result.headline is None or result.run_id is None:
            continue
        for level in judge_levels(windows_of(result.run_id), result.headline.repeats, limits):
            figures = level_generation(level, limits.terms, result.headline.measured, LATENCY_RESOLUTION_MS)
            if figures is None:
                continue
            rows.append(
                {
                    "configuration": result.name,
                    "load": level.load,
                    OUTPUT_TPS_PER_USER.frame: figures.value("output_tps_per_user"),
                    OUTPUT_TPS.frame: figures.value("output_tps"),
                    GOODPUT.frame: figures.value("goodput"),
                    "meets SLO": level.meets,
                    "why": level.why_not,
                }
            )
    return pd.DataFrame(rows)


def text_cell(value: Any) -> str:
    """A table cell as text (columns that mix numbers, flags and words): '-' for missing, figures grouped."""
    if value is None or (isinstance(value, float) and value != value):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.3f}".rstrip("0").rstrip(".")
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def series_frame(result: CandidateResult, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Per-second series of one run; invocations per minute is the second's successful completions x 60. The store
    keeps ceil(duration) seconds (metrics.summary.per_second_series): the last one holds only the run's tail, a
    fraction of a second x 60 that would read as a drop to zero, so it is left out here (the stored rows stay)."""
    frame = pd.DataFrame(rows)
    if frame.empty:
        return frame
    frame = frame[frame["second"] < frame["second"].max()].copy()
    frame["configuration"] = result.name
    frame[INVOCATIONS.frame] = frame["ok"] * 60
    return frame


def server_breakdown(results: list[CandidateResult]) -> pd.DataFrame:
    """Long table of the server-side average time per request by part (queue, compute input/infer/output)."""
    rows = []
    for r in results:
        parts = r.server.avg_us
        rows += [
            {"configuration": r.name, "part": part, "ms": us / 1000}
            for part in SERVER_PARTS
            if (us := parts.get(part)) is not None
        ]
    return pd.DataFrame(rows)


def windows_frame(result: CandidateResult, rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The run's steady-state windows with a stable/unstable label (empty when the store has none)."""
    frame = pd.DataFrame([w for w in rows if w.get("start_s") is not None and w.get("end_s") is not None])
    if frame.empty:
        return frame
    if "repeat" in frame:  # the per-second series is the first repeat's
        frame = frame[frame["repeat"] == frame["repeat"].min()].copy()
    frame["window"] = ["stable" if s else "unstable" for s in frame["stable"]] if "stable" in frame else "window"
    frame["configuration"] = result.name
    return frame


def history_table(points: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(points)


def payload_frame(payload: PayloadLengths) -> pd.DataFrame:
    """The payload's token-length histogram, a row per range: its bounds (`to` exclusive, for the bars), its label,
    requests and share."""
    return pd.DataFrame(
        {
            "from": [b.low for b in payload.histogram],
            "to": [b.high + 1 for b in payload.histogram],
            "input tokens": [tokens for tokens, _, _ in payload.histogram_rows()],
            "requests": [b.requests for b in payload.histogram],
            "share": [b.requests / payload.requests for b in payload.histogram],
        }
    )
