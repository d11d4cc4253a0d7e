"""The HTML report: one self-contained file (inline CSS, inline SVG charts, no script, nothing fetched).

Every user-supplied or measured string goes through `html.escape`.
"""

from __future__ import annotations

from html import escape

from recommender.report.chart import cost_chart, frontier_chart, length_chart
from recommender.report.columns import ERROR_RATE
from recommender.report.rows import Report, ReportColumn, ReportRow, cell, columns, excluded_columns

STYLE = (
    '\nbody { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 1200px; '
    "color: #222; }\n"
    """h1 { font-size: 1.6rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin: 0.5rem 0; }
th, td { border: 1px solid #ccc; padding: 0.3rem 0.5rem; text-align: right; }
th { background: #f3f3f3; } td.text { text-align: left; }
tr.recommended td { background: #e8f5ec; font-weight: 600; }
dl.facts { display: grid; grid-template-columns: max-content auto; gap: 0.2rem 1rem; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; }
.justification { font-size: 1.05rem; line-height: 1.5; }
.tie { border-left: 4px solid #c9a227; padding: 0.3rem 0.8rem; background: #fff8e1; }
.scroll { overflow-x: auto; }
table.time td.bar { width: 12rem; } table.time td.bar div { background: #4c78a8; height: 0.8em; }
.charts { display: flex; flex-wrap: wrap; gap: 1rem; }
svg { border: 1px solid #ddd; background: #fff; font-size: 11px; }
svg .tick { fill: #555; } svg .label { fill: #333; font-size: 10px; }
"""
)
TEXT_FIELDS = frozenset(
    {"name", "optimization", "dynamic_batching", "instance_type", "status", "excluded_reasons", "flags"}
)


def render_html(report: Report) -> str:
    """The whole report as one HTML document."""
    priced = any(row.cost_per_million is not None for row in report.rows)
    body = [
        f"<h1>{escape(report.title)}</h1>",
        f"<p>{escape(report.description)}</p>" if report.description else "",
        _limits(report),
        "<h2>Recommendation</h2>",
        _facts(report),
        f'<p class="justification">{escape(report.justification)}</p>',
        f'<p class="tie"><strong>Tie:</strong> {escape(report.tie_notice)}</p>' if report.tie_notice else "",
        "<h2>Ranked configurations</h2>",
        _table(columns(report.percentile, priced, report.kind), report.rows, "ranked")
        if report.rows
        else "<p>No candidate is within the limits.</p>",
        f"<p>Score weights: {escape(report.weights)}.</p>",
        "<h2>Charts</h2>",
        f'<div class="charts">{frontier_chart(report)}\n{cost_chart(report)}</div>',
        _payload(report),
        _excluded(report),
        _time_spent(report),
        _notes(report),
        _definitions(report),
    ]
    return (
        "\n".join(
            [
                "<!DOCTYPE html>",
                '<html lang="en">',
                "<head>",
                '<meta charset="utf-8">',
                f"<title>{escape(report.title)}</title>",
                f"<style>{STYLE}</style>",
                "</head>",
                "<body>",
                *(part for part in body if part),
                "</body>",
                "</html>",
            ]
        )
        + "\n"
    )


def _limits(report: Report) -> str:
    items = [
        f"Latency threshold: {report.percentile} &le; {report.threshold_ms:g} ms; "
        f"error rate &le; {ERROR_RATE.format(report.max_error_rate)}",
        f"Target load: {report.target_ipm:,.0f} invocations per minute",
        f"Pricing: {escape(report.pricing)}",
    ]
    return "<ul>" + "".join(f"<li>{item}</li>" for item in items) + "</ul>"


def _facts(report: Report) -> str:
    pairs = "".join(f"<dt>{escape(label)}</dt><dd>{escape(value)}</dd>" for label, value in report.facts)
    return f'<dl class="facts">{pairs}</dl>'


def _table(cols: tuple[ReportColumn, ...], rows: tuple[ReportRow, ...], name: str) -> str:
    head = "".join(f'<th scope="col">{escape(c.header)}</th>' for c in cols)
    lines = []
    for row in rows:
        cells = "".join(f"<td{_cell_class(c)}>{escape(cell(row, c))}</td>" for c in cols)
        css = ' class="recommended"' if row.recommended else ""
        lines.append(f"<tr{css}>{cells}</tr>")
    table = f'<table class="{name}"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'
    return f'<div class="scroll">{table}</div>'


def _cell_class(column: ReportColumn) -> str:
    return ' class="text"' if column.field in TEXT_FIELDS else ""


def _excluded(report: Report) -> str:
    if not report.excluded:
        return ""
    return "<h2>Excluded candidates</h2>\n" + _table(
        excluded_columns(report.percentile, report.kind), report.excluded, "excluded"
    )


def _payload(report: Report) -> str:
    """What the runs were sent, in one line, and its token-length histogram as a chart."""
    if report.payload is None:
        return ""
    return f"<h2>Payload</h2>\n<p>{escape(report.payload.describe())}</p>\n{length_chart(report)}"


def _time_spent(report: Report) -> str:
    """Where the time went: a row per stage, its share drawn as a bar."""
    rows = report.time_rows()
    if not rows:
        return ""
    cells = "".join(
        f'<tr><td class="text">{escape(stage)}</td><td>{seconds}</td><td>{share}</td>'
        f'<td class="bar"><div style="width:{share if stage != "total" else "0%"}"></div></td></tr>'
        for stage, seconds, share in rows
    )
    head = "<tr><th>stage</th><th>seconds</th><th>share</th><th></th></tr>"
    return f'<h2>Where the time went</h2><table class="time">{head}{cells}</table>'


def _notes(report: Report) -> str:
    if not report.notes:
        return ""
    return "<h2>Notes</h2><ul>" + "".join(f"<li>{escape(note)}</li>" for note in report.notes) + "</ul>"


def _definitions(report: Report) -> str:
    if not report.definitions:
        return ""
    pairs = "".join(f"<dt>{escape(term)}</dt><dd>{escape(text)}</dd>" for term, text in report.definitions)
    return f'<h2>Definitions</h2><dl class="facts">{pairs}</dl>'
