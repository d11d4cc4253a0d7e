"""The Markdown report: the recommendation in plain words, the ranked table, the excluded candidates, and what the
search did not measure in full (pruned or left out by its budget) and why."""

from __future__ import annotations

from recommender.candidates import RunStatus
from recommender.report.rows import Report, ReportColumn, ReportRow, cell, columns, excluded_columns


def render_markdown(report: Report) -> str:
    """The whole report as GitHub-flavoured Markdown."""
    parts = [f"# {_inline(report.title)}", ""]
    if report.description:
        parts += [_inline(report.description), ""]
    parts += _limits(report)
    parts += [
        "## Recommendation",
        "",
        *(f"- **{_inline(label)}**: {_inline(value)}" for label, value in report.facts),
        "",
    ]
    parts += [_inline(report.justification), ""]
    if report.tie_notice:
        parts += [f"> **Tie:** {_inline(report.tie_notice)}", ""]
    parts += ["## Ranked configurations", ""]
    priced = any(row.cost_per_million is not None for row in report.rows)
    parts += (
        _table(columns(report.percentile, priced, report.kind), report.rows)
        if report.rows
        else ["No candidate is within the limits."]
    )
    parts += ["", f"Score weights: {_inline(report.weights)}.", ""]
    parts += _payload(report)
    if report.excluded:
        parts += [
            "## Excluded candidates",
            "",
            *_table(excluded_columns(report.percentile, report.kind), report.excluded),
            "",
        ]
    parts += _not_measured(report.excluded)
    parts += _time_spent(report)
    if report.notes:
        parts += ["## Notes", "", *(f"- {_inline(note)}" for note in report.notes), ""]
    if report.definitions:
        parts += [
            "## Definitions",
            "",
            *(f"- **{_inline(term)}**: {_inline(text)}" for term, text in report.definitions),
            "",
        ]
    return "\n".join(parts).rstrip("\n") + "\n"


def _not_measured(excluded: tuple[ReportRow, ...]) -> list[str]:
    """Adaptive search: candidates pruned from the race (partial figures above) or left out by the search budget."""
    rows = [
        row
        for row in excluded
        if row.status == RunStatus.PRUNED or (row.status == RunStatus.SKIPPED and row.budget_skipped)
    ]
    if not rows:
        return []
    lines = [f"- **{_inline(row.name)}** ({row.status}): {_inline('; '.join(row.excluded_reasons))}" for row in rows]
    return [
        "## Not measured in full",
        "",
        "Pruned candidates were measured briefly (a load search, 1 repeat) and "
        "stopped; skipped ones were never measured.",
        "",
        *lines,
        "",
    ]


def _payload(report: Report) -> list[str]:
    """What the runs were sent: the payload in one line and its token-length histogram (a bar of █ per row)."""
    if report.payload is None:
        return []
    rows = report.payload.histogram_rows()
    most = max(count for _, count, _ in rows)
    table = [f"| {tokens} | {count:,} | {share} | {'█' * round(20 * count / most)} |" for tokens, count, share in rows]
    return [
        "## Payload",
        "",
        _inline(report.payload.describe()),
        "",
        "| input tokens | requests | share | |",
        "| ---: | ---: | ---: | --- |",
        *table,
        "",
    ]


def _time_spent(report: Report) -> list[str]:
    rows = report.time_rows()
    if not rows:
        return []
    table = [f"| {stage} | {seconds} | {share} |" for stage, seconds, share in rows]
    return ["## Where the time went", "", "| stage | seconds | share |", "| --- | ---: | ---: |", *table, ""]


def _limits(report: Report) -> list[str]:
    return [
        f"- Latency threshold: {report.percentile} <= {report.threshold_ms:g} ms; "
        f"error rate <= {report.max_error_rate:.2%}",
        f"- Target load: {report.target_ipm:,.0f} invocations per minute",
        f"- Pricing: {_inline(report.pricing)}",
        "",
    ]


def _table(cols: tuple[ReportColumn, ...], rows: tuple[ReportRow, ...]) -> list[str]:
    lines = ["| " + " | ".join(_inline(c.header) for c in cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    lines += ["| " + " | ".join(_inline(cell(row, c)) for c in cols) + " |" for row in rows]
    return lines


def _inline(text: str) -> str:
    """Text safe inside a Markdown table cell or line: pipes escaped, line breaks folded, HTML tags defused."""
    folded = " ".join(str(text).split())
    return folded.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")
