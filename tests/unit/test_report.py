"""Reports from a store seeded with fixed figures: Markdown and CSV snapshots, HTML structure and escaping, charts.

Snapshots live in tests/unit/snapshots/ and are compared exactly. After an intended change, rewrite them with
`UPDATE_SNAPSHOTS=1 python -m pytest tests/unit/test_report.py` and review the diff.
"""

from __future__ import annotations

import csv
import io
import os
from html.parser import HTMLParser
from pathlib import Path

import pytest

from recommender.report import build_report, render_csv, render_html, render_markdown
from recommender.report.chart import Point, frontier, nice_ticks
from recommender.report.rows import Report
from recommender.review import recommend_from_store
from tests.unit.seeded_study import DESCRIPTION, FAILED_REASON, SPEC, fixed_catalog, seed_study

SNAPSHOTS = Path(__file__).parent / "snapshots"


@pytest.fixture
def report(tmp_path: Path) -> Report:
    store, _, _ = seed_study(f"sqlite:///{tmp_path / 'results.db'}")
    rec, _, _ = recommend_from_store(store, "seed-study", [fixed_catalog()])
    return build_report(rec)


@pytest.fixture
def unpriced_report(tmp_path: Path) -> Report:
    document = {**SPEC, "target": {"instance_type": "local-cpu", "price_per_hour": 0.0}}
    store, _, _ = seed_study(f"sqlite:///{tmp_path / 'results.db'}", document)
    rec, _, _ = recommend_from_store(store, "seed-study", [fixed_catalog()])
    return build_report(rec)


def matches_snapshot(text: str, name: str) -> None:
    path = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert text == path.read_text(), f"{name} differs from its snapshot"


@pytest.mark.parametrize(("render", "name"), [(render_markdown, "seed-study.md"), (render_csv, "seed-study.csv")])
def test_report_matches_snapshot(report: Report, render, name: str) -> None:
    matches_snapshot(render(report), name)


def test_unpriced_markdown_says_unpriced_not_free(unpriced_report: Report) -> None:
    text = render_markdown(unpriced_report)
    assert "local-cpu is unpriced (not free)" in text
    assert "| unpriced | unpriced |" in text  # the money columns of every ranked row
    assert " 0.00 " not in text and "0.0000" not in text


def test_unpriced_csv_leaves_cost_cells_empty(unpriced_report: Report) -> None:
    first = next(csv.DictReader(io.StringIO(render_csv(unpriced_report))))
    cells = dict(first)
    assert cells["cost per hour (USD)"] == "" and cells["cost per million (USD)"] == ""
    assert cells["initial instance count"] == "56"


class Page(HTMLParser):
    """Collects tags, text, table cells and external references of an HTML document."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.text: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self.references: list[str] = []
        self._table: str | None = None
        self._cell: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        values = dict(attrs)
        self.references += [v for k, v in attrs if k in ("src", "href") and v]
        if tag == "table":
            self._table = values.get("class", "")
            self.tables[self._table] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell))
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text.append(data)
        if self._cell is not None:
            self._cell.append(data)


@pytest.fixture
def page(report: Report) -> Page:
    parser = Page()
    parser.feed(render_html(report))
    return parser


def test_html_has_the_ranked_table_with_the_study_columns(page: Page) -> None:
    header, *rows = page.tables["ranked"]
    assert header[:2] == ["rank", "configuration"]
    assert {
        "model optimization",
        "dynamic batching",
        "instance group",
        "instance type",
        "vCPUs",
        "GPUs",
        "GPU memory",
        "initial instance count",
        "invocations per minute per instance",
        "model latency (p95, ms)",
        "cost per hour (USD)",
    } <= set(header)
    assert [row[1] for row in rows] == ["pt-db-ig2-mbs8", "pt-db-ig1-mbs8", "pt-nodb-ig2-mbs8", "pt-nodb-ig1-mbs8"]
    first = dict(zip(header, rows[0], strict=False))
    assert (first["initial instance count"], first["cost per hour (USD)"], first["GPU memory"]) == (
        "56",
        "41.24",
        "16 GiB",
    )


def test_html_escapes_every_user_string(page: Page, report: Report) -> None:
    assert "script" not in page.tags and "b" not in page.tags  # the failure reason and description stayed text
    text = "".join(page.text)
    assert FAILED_REASON in text and DESCRIPTION in text
    excluded = {row[0]: row for row in page.tables["excluded"][1:]}
    assert FAILED_REASON in excluded["onnx-nodb-ig2-mbs8"][-1]


def test_html_is_self_contained_with_three_inline_svg_charts(page: Page) -> None:
    assert page.tags.count("svg") == 3  # the frontier, the costs and the payload's token lengths
    assert page.references == []  # no script, stylesheet or image is fetched
    assert "link" not in page.tags and "script" not in page.tags
    assert "style" in page.tags


def test_html_charts_show_frontier_threshold_and_costs(report: Report) -> None:
    html = render_html(report)
    assert 'class="frontier"' in html and 'class="threshold"' in html and "threshold 500 ms" in html
    assert html.count('class="bar"') == 4  # one bar per ranked (priced) configuration


def test_the_payload_s_token_lengths_are_shown_as_a_histogram(report: Report) -> None:
    html, markdown = render_html(report), render_markdown(report)
    assert html.count('class="length"') == len(report.payload.histogram) == 16  # one bar per range, empty ones too
    assert "<title>9-12 tokens: 10 requests (25%)</title>" in html
    assert "40 requests from queries.jsonl; input tokens per request: 9 to 70, median 14, mean 20.0" in markdown
    assert "| 13-16 | 15 | 38% | ████████████████████ |" in markdown  # the most requests: the longest bar


def test_frontier_keeps_points_nothing_beats_on_both_axes() -> None:
    points = [
        Point("a", 300, 45, "ranked"),
        Point("b", 540, 38, "ranked"),
        Point("c", 600, 90, "excluded"),
        Point("d", 200, 20, "ranked"),
        Point("e", 500, 40, "ranked"),
    ]
    assert [p.name for p in frontier(points)] == ["d", "b", "c"]


@pytest.mark.parametrize(("high", "ticks"), [(567.0, [0, 200, 400, 600]), (38.5, [0, 10, 20, 30, 40]), (0, [0, 1])])
def test_nice_ticks(high: float, ticks: list[float]) -> None:
    assert nice_ticks(high) == pytest.approx(ticks)


@pytest.mark.parametrize("chart", ["frontier_chart", "cost_chart"])
def test_charts_are_well_formed_svg_for_priced_and_unpriced(
    report: Report, unpriced_report: Report, chart: str
) -> None:
    import xml.etree.ElementTree as ElementTree

    from recommender.report import chart as charts

    for each in (report, unpriced_report):
        root = ElementTree.fromstring(getattr(charts, chart)(each))
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert "unpriced: no cost figures (not free)" in charts.cost_chart(unpriced_report)


def test_the_report_says_what_intervals_and_sizing_rest_on() -> None:
    import dataclasses

    from recommender.decide.recommendation import recommend
    from recommender.metrics.intervals import Interval
    from tests.unit.test_recommendation import result, spec

    noisy = result(
        "A",
        540,
        38,
        repeats=3,
        samples=4812,
        ipm_interval=Interval(540, 500, 580, 3),
        latency_interval=Interval(38, 36.5, 39.5, 3),
    )
    report = build_report(
        recommend([noisy, dataclasses.replace(result("B", 400, 30), key="k-B")], spec(), [fixed_catalog()])
    )
    facts = dict(report.facts)
    assert facts["invocations per minute per instance"] == "540 (95 % interval 500 to 580, n=3 repeats)"
    assert facts["model latency (p95)"] == (
        "38.0 ms (threshold 500 ms; 95 % interval 36.5 to 39.5 ms, n=3 repeats; over 4,812 requests)"
    )
    assert facts["initial instance count"] == (
        "60 (for 30,000 invocations per minute, sized on the interval lower "
        "bound (n=3 repeats); 56 at the point estimate)"
    )
    text = render_markdown(report)
    assert "| 60 (56 at the point estimate) | 540 | 500 to 580 (n=3 repeats) |" in text
    assert "## Definitions" in text and "**95 % interval**: Student-t over the per-repeat level means" in text


def test_only_budget_skips_are_listed_as_not_measured_in_full(report: Report) -> None:
    """The budget skip is read from the stored flag, not from the reason's wording."""
    from dataclasses import replace

    first, second, *_ = report.rows
    budget = replace(first, name="by-budget", status="skipped", budget_skipped=True, excluded_reasons=("refused",))
    engine = replace(second, name="no-engine", status="skipped", excluded_reasons=("budget: but not flagged",))
    text = render_markdown(replace(report, excluded=(budget, engine)))
    assert "## Not measured in full" in text
    assert "**by-budget** (skipped): refused" in text
    assert "no-engine** (skipped)" not in text.split("## Not measured in full")[1]


def test_each_interval_is_labelled_with_its_own_n() -> None:
    """Window noise: the throughput interval over 6 windows, the latency one over the 4 with enough samples."""
    import dataclasses

    from recommender.decide.recommendation import recommend
    from recommender.metrics.intervals import Interval
    from tests.unit.test_recommendation import result, spec

    noisy = result(
        "A",
        540,
        38,
        ipm_interval=Interval(540, 500, 580, 6, "windows"),
        latency_interval=Interval(38, 36.5, 39.5, 4, "windows"),
    )
    rec = recommend([noisy, dataclasses.replace(result("B", 400, 30), key="k-B")], spec(), [fixed_catalog()])
    facts = dict(build_report(rec).facts)
    assert "n=6 windows" in facts["invocations per minute per instance"]
    assert "95 % interval 36.5 to 39.5 ms, n=4 windows" in facts["model latency (p95)"]
    (first, *_) = rec.to_document()["ranked"]  # `--json`
    assert first["interval"].startswith("n=6 windows") and first["latency_interval_n"].startswith("n=4 windows")


def test_the_json_document_holds_the_payload_and_the_token_figures(tmp_path: Path) -> None:
    store, _, _ = seed_study(f"sqlite:///{tmp_path / 'results.db'}")
    rec, _, _ = recommend_from_store(store, "seed-study", [fixed_catalog()])
    document = rec.to_document()
    assert document["payload"]["mean_tokens"] == 20.0 and document["payload"]["source"] == "queries.jsonl"
    winner = document["ranked"][0]
    assert winner["input_tokens_per_second"] == pytest.approx(winner["invocations_per_minute"] / 60 * 20.0)
    assert winner["cost_per_million_tokens"] == pytest.approx(winner["cost_per_million"] / 20.0)
