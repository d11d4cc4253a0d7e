"""An experiment's recommendation sent to MLflow: the one entry `recommender export --mlflow` and the job's
`tracking.mlflow` share (the caller reads the store and hands over what it read)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from recommender.candidates import CandidateResult
from recommender.decide.recommendation import Recommendation
from recommender.metrics.levels import WindowRecord
from recommender.report.html import render_html
from recommender.report.markdown import render_markdown
from recommender.report.rows import build_report
from recommender.tracking.mlflow import ExportedRun, export_to_mlflow
from recommender.tracking.records import candidate_records


def export_experiment(
    uri: str,
    rec: Recommendation,
    results: list[CandidateResult],
    windows_of: Callable[[int], list[WindowRecord]],
    run_artifacts: Mapping[str, Mapping[str, bytes]] | None = None,
) -> list[ExportedRun]:
    """Every stored candidate as one MLflow run, with the report (Markdown and HTML) on each."""
    report = build_report(rec)
    artifacts = {"report.md": render_markdown(report).encode(), "report.html": render_html(report).encode()}
    records = candidate_records(rec, results, windows_of)
    return export_to_mlflow(uri, rec.experiment, records, artifacts, run_artifacts)
