"""What each candidate's MLflow run holds, read from the recommendation (its report rows) and the stored results."""

from __future__ import annotations

from collections.abc import Callable

from recommender.candidates import CandidateResult, RunStatus
from recommender.decide.recommendation import Recommendation
from recommender.metrics.levels import WindowRecord
from recommender.report.columns import only_for
from recommender.report.rows import ReportRow, build_report
from recommender.tracking.mlflow import CandidateRecord
from recommender.vocabulary import PERCENTILE_NAMES


def candidate_records(
    rec: Recommendation, results: list[CandidateResult], windows_of: Callable[[int], list[WindowRecord]]
) -> list[CandidateRecord]:
    """One record per stored candidate, in the report's order (ranked first); `windows_of(run_id)` its windows."""
    by_key = {r.key: r for r in results}
    rows = [row for row in build_report(rec).all_rows if row.key in by_key]
    return [_record(rec, row, by_key[row.key], windows_of) for row in rows]


def _record(
    rec: Recommendation, row: ReportRow, result: CandidateResult, windows_of: Callable[[int], list[WindowRecord]]
) -> CandidateRecord:
    windows = windows_of(result.run_id) if result.run_id is not None else []
    p = rec.percentile
    return CandidateRecord(
        key=result.key,
        name=result.name,
        params={**{name: str(value) for name, value in sorted(result.config.items())}, "backend": str(result.backend)},
        metrics=_metrics(row, result),
        series={
            "window_invocations_per_minute": tuple(w.ipm for w in windows),
            f"window_latency_{p}_ms": tuple(w.latency(p) for w in windows),  # None (too few samples): no value
            **_generation_series(windows),
        },
        tags={
            "recommender.experiment": rec.experiment,
            "recommender.target": row.instance_type,
            "recommender.status": str(result.status),
            "recommender.verdict": _verdict(row),
        },
        end_ms=int(result.finished_at.timestamp() * 1000) if result.finished_at else 0,
        failed=result.status == RunStatus.FAILED,
    )


def _metrics(row: ReportRow, result: CandidateResult) -> dict[str, float]:
    headline = result.headline
    values: dict[str, float | None] = {
        "within_limits": 1.0 if row.rank is not None else 0.0,
        "rank": row.rank,
        "score": row.score,
        "initial_instance_count": row.initial_instance_count,
        "cost_per_hour": row.cost_per_hour,
        "cost_per_million": row.cost_per_million,
        "input_tokens_per_second": row.input_tokens_per_second,
        "cost_per_million_tokens": row.cost_per_million_tokens,
        "max_invocations_low": row.ipm_low,
        "max_invocations_high": row.ipm_high,
        **{f"stage_{stage}_s": seconds for stage, seconds in result.server.stages.items()},
        **_generation_metrics(row),
    }
    if headline is not None:
        latency = headline.latency_interval
        values |= {
            "max_invocations": headline.max_invocations,
            "invocations_per_minute": headline.invocations_per_minute,
            "model_latency_ms": headline.model_latency_ms,
            "model_latency_low_ms": latency.low if latency is not None else None,
            "model_latency_high_ms": latency.high if latency is not None else None,
            "error_rate": headline.error_rate,
            "requests": headline.requests,
            "repeats": headline.repeats,
            **{f"latency_{name}_ms": headline.latency(name) for name in PERCENTILE_NAMES},
        }
    return {name: float(value) for name, value in values.items() if value is not None}


def _generation_metrics(row: ReportRow) -> dict[str, float | None]:
    """A generative candidate's figures, named as the catalog names them, each with its interval's ends."""
    if row.generation is None:
        return {}
    values: dict[str, float | None] = {}
    for metric in only_for("generative"):
        if not metric.figure:
            values[metric.name] = metric.read(row)
            continue
        interval = row.generation.interval(metric.figure)
        values[metric.name] = metric.read(row)
        values[f"{metric.name}_low"] = interval.low if interval is not None else None
        values[f"{metric.name}_high"] = interval.high if interval is not None else None
    return values


def _generation_series(windows: list[WindowRecord]) -> dict[str, tuple[float | None, ...]]:
    """Per window: output tokens/s and TTFT p95 of a generative run (none for an embedding one)."""
    if not any(w.generation for w in windows):
        return {}
    return {
        "window_output_tokens_per_second": tuple(w.generation.output_tps if w.generation else None for w in windows),
        "window_ttft_p95_ms": tuple(w.generation.percentile("ttft", "p95") if w.generation else None for w in windows),
    }


def _verdict(row: ReportRow) -> str:
    if row.recommended:
        return "recommended"
    if row.rank is not None:
        return f"ranked {row.rank}" + (" (tied with the winner)" if row.tied else "")
    return "excluded: " + "; ".join(row.excluded_reasons)
