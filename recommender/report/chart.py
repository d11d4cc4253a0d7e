"""Two inline SVG charts for the HTML report, drawn from report rows (no JavaScript, nothing fetched).

- the throughput-latency frontier: every measured candidate at (invocations per minute per instance,
  latency at the percentile), the threshold as a dashed line, and the frontier of candidates that no
  other beats on both throughput and latency;
- cost per million inferences by configuration (ranked candidates; a plain message when unpriced);
- the payload's token-length histogram (requests per range of input tokens).

Every text drawn is escaped; coordinates are rounded to 0.1 px so the output is stable.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

from recommender.report.columns import COST_PER_MILLION, MAX_INVOCATIONS, MODEL_LATENCY
from recommender.report.rows import Report, ReportRow

WIDTH, HEIGHT = 640, 360
MARGIN = {"left": 64, "right": 24, "top": 32, "bottom": 48}
COLORS = {
    "recommended": "#1b7f3b",
    "ranked": "#2f5d9e",
    "excluded": "#b0453a",
    "frontier": "#1b7f3b",
    "threshold": "#b0453a",
}


@dataclass(frozen=True)
class Point:
    name: str
    ipm: float
    model_latency_ms: float
    kind: str  # recommended | ranked | excluded


def measured_points(rows: tuple[ReportRow, ...]) -> list[Point]:
    """Rows that have both a throughput and a latency figure."""
    points = []
    for row in rows:
        if row.invocations_per_minute and row.model_latency_ms is not None:
            kind = "recommended" if row.recommended else "ranked" if row.rank else "excluded"
            points.append(Point(row.name, row.invocations_per_minute, row.model_latency_ms, kind))
    return points


def frontier(points: list[Point]) -> list[Point]:
    """Points that no other point beats on both axes (more throughput and less latency), by throughput."""

    def beaten(p: Point) -> bool:
        return any(
            q.ipm >= p.ipm
            and q.model_latency_ms <= p.model_latency_ms
            and (q.ipm, q.model_latency_ms) != (p.ipm, p.model_latency_ms)
            for q in points
        )

    return sorted((p for p in points if not beaten(p)), key=lambda p: (p.ipm, p.model_latency_ms))


def nice_ticks(high: float, count: int = 5) -> list[float]:
    """Round tick values from 0 to at least `high` (1, 2 or 5 times a power of ten apart)."""
    if high <= 0:
        return [0.0, 1.0]
    raw = high / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    return [i * step for i in range(math.ceil(high / step - 1e-9) + 1)]


def _f(value: float) -> str:
    return f"{value:.1f}"


def _tick_label(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == 0 else f"{value:g}"


def _svg(title: str, body: list[str], height: float = HEIGHT) -> str:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {_f(height)}" '
        f'width="{WIDTH}" height="{_f(height)}" '
        f'role="img" aria-label="{escape(title)}">'
    )
    return "\n".join([head, f"<title>{escape(title)}</title>", *body, "</svg>"])


def _text(x: float, y: float, text: str, anchor: str = "middle", extra: str = "") -> str:
    return f'<text x="{_f(x)}" y="{_f(y)}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'


def _axes(x_ticks: list[float], y_ticks: list[float], x_label: str, y_label: str) -> list[str]:
    left, bottom = MARGIN["left"], HEIGHT - MARGIN["bottom"]
    right, top = WIDTH - MARGIN["right"], MARGIN["top"]
    parts = [
        f'<line x1="{left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="#333"/>',
        f'<line x1="{left}" y1="{bottom}" x2="{left}" y2="{top}" stroke="#333"/>',
    ]
    for tick in x_ticks:
        x = _x(tick, x_ticks[-1])
        parts.append(_text(x, bottom + 16, _tick_label(tick), extra=' class="tick"'))
    for tick in y_ticks:
        y = _y(tick, y_ticks[-1])
        parts.append(f'<line x1="{left}" y1="{_f(y)}" x2="{right}" y2="{_f(y)}" stroke="#eee"/>')
        parts.append(_text(left - 6, y + 4, _tick_label(tick), anchor="end", extra=' class="tick"'))
    parts.append(_text((left + right) / 2, HEIGHT - 10, x_label))
    parts.append(_text(14, (top + bottom) / 2, y_label, extra=f' transform="rotate(-90 14 {_f((top + bottom) / 2)})"'))
    return parts


def _x(value: float, high: float) -> float:
    span = WIDTH - MARGIN["left"] - MARGIN["right"]
    return MARGIN["left"] + span * value / high


def _y(value: float, high: float) -> float:
    span = HEIGHT - MARGIN["top"] - MARGIN["bottom"]
    return HEIGHT - MARGIN["bottom"] - span * min(value, high) / high


def frontier_chart(report: Report) -> str:
    """Throughput against latency for every measured candidate, with the threshold and the frontier."""
    title = f"Throughput-latency frontier ({report.percentile})"
    points = measured_points(report.all_rows)
    if not points:
        return _svg(title, [_text(WIDTH / 2, HEIGHT / 2, "no candidate has throughput and latency figures")])
    x_ticks = nice_ticks(max(p.ipm for p in points) * 1.05)
    y_ticks = nice_ticks(max(max(p.model_latency_ms for p in points), report.threshold_ms) * 1.05)
    body = _axes(x_ticks, y_ticks, MAX_INVOCATIONS.header, f"{report.percentile} latency ({MODEL_LATENCY.unit})")
    body.append(_threshold_line(report.threshold_ms, y_ticks[-1]))
    line = " ".join(f"{_f(_x(p.ipm, x_ticks[-1]))},{_f(_y(p.model_latency_ms, y_ticks[-1]))}" for p in frontier(points))
    body.append(
        f'<polyline points="{line}" fill="none" stroke="{COLORS["frontier"]}" stroke-width="2" class="frontier"/>'
    )
    for p in points:
        body.extend(_marker(p, x_ticks[-1], y_ticks[-1]))
    body.append(
        _text(
            WIDTH - MARGIN["right"],
            18,
            "frontier: no other candidate has more throughput and less latency",
            anchor="end",
            extra=' class="legend"',
        )
    )
    return _svg(title, body)


def _threshold_line(threshold_ms: float, high: float) -> str:
    y = _f(_y(threshold_ms, high))
    return (
        f'<line x1="{MARGIN["left"]}" y1="{y}" x2="{WIDTH - MARGIN["right"]}" y2="{y}" '
        f'stroke="{COLORS["threshold"]}" stroke-dasharray="6 4" class="threshold"/>'
        + _text(
            WIDTH - MARGIN["right"],
            float(y) - 4,
            f"threshold {threshold_ms:g} ms",
            anchor="end",
            extra=f' fill="{COLORS["threshold"]}"',
        )
    )


def _marker(p: Point, x_high: float, y_high: float) -> list[str]:
    x, y = _x(p.ipm, x_high), _y(p.model_latency_ms, y_high)
    radius = 6 if p.kind == "recommended" else 4
    return [
        f'<circle cx="{_f(x)}" cy="{_f(y)}" r="{radius}" fill="{COLORS[p.kind]}" class="{p.kind}">'
        f"<title>{escape(p.name)}: {MAX_INVOCATIONS.format(p.ipm)}/min, "
        f"{MODEL_LATENCY.with_unit(p.model_latency_ms)}</title></circle>",
        _text(x + 8, y - 6, p.name, anchor="start", extra=' class="label"'),
    ]


def cost_chart(report: Report) -> str:
    """Cost per million inferences by ranked configuration (horizontal bars, cheapest first)."""
    title = "Cost per million inferences by configuration (USD)"
    priced = sorted(
        ((r, cost) for r in report.rows if (cost := r.cost_per_million) is not None), key=lambda p: (p[1], p[0].name)
    )
    if not priced:
        why = "unpriced: no cost figures (not free)" if report.rows else "no ranked candidate"
        return _svg(title, [_text(WIDTH / 2, HEIGHT / 2, why)])
    high = nice_ticks(max(cost for _, cost in priced) * 1.05)[-1]
    left, span = 180, WIDTH - 180 - MARGIN["right"] - 70
    band = min(40.0, (HEIGHT - MARGIN["top"] - MARGIN["bottom"]) / len(priced))
    body = [_text(WIDTH / 2, 18, title)]
    for index, (row, cost) in enumerate(priced):
        y = MARGIN["top"] + index * band
        width = span * cost / high
        color = COLORS["recommended"] if row.recommended else COLORS["ranked"]
        body.append(_text(left - 8, y + band / 2 + 4, row.name, anchor="end", extra=' class="label"'))
        body.append(
            f'<rect x="{left}" y="{_f(y + band * 0.15)}" width="{_f(width)}" height="{_f(band * 0.7)}" '
            f'fill="{color}" class="bar"><title>{escape(row.name)}: '
            f"{COST_PER_MILLION.with_unit(cost)}</title></rect>"
        )
        body.append(_text(left + width + 6, y + band / 2 + 4, COST_PER_MILLION.format(cost), anchor="start"))
    return _svg(title, body, height=MARGIN["top"] + band * len(priced) + 16)


def length_chart(report: Report) -> str:
    """The payload's token-length histogram: requests (y) per range of input tokens (x), one bar per range."""
    title = "Requests by input tokens (the payload's own tokens, no padding)"
    rows = report.payload.histogram_rows() if report.payload else ()
    if not rows:
        return _svg(title, [_text(WIDTH / 2, HEIGHT / 2, "the payload was not recorded")])
    high = nice_ticks(max(count for _, count, _ in rows) * 1.05)[-1]
    left, bottom = MARGIN["left"], HEIGHT - MARGIN["bottom"]
    band = (WIDTH - left - MARGIN["right"]) / len(rows)
    body = [_text(WIDTH / 2, 18, title), _text(WIDTH / 2, HEIGHT - 8, "input tokens per request")]
    for index, (tokens, count, share) in enumerate(rows):
        height = (bottom - MARGIN["top"]) * count / high
        x = left + index * band
        body.append(
            f'<rect x="{_f(x + band * 0.1)}" y="{_f(bottom - height)}" width="{_f(band * 0.8)}" '
            f'height="{_f(height)}" fill="{COLORS["ranked"]}" class="length"><title>{escape(tokens)} tokens: '
            f"{count:,} requests ({share})</title></rect>"
        )
        body.append(_text(x, bottom + 14, tokens.split("-")[0], extra=' class="tick"'))  # the range's low edge
    body.append(_text(left - 8, MARGIN["top"] + 4, f"{high:,.0f}", anchor="end", extra=' class="tick"'))
    return _svg(title, body)
