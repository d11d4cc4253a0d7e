"""The ranking as `recommender run` and `recommender rank` print it: one view, in the recommendation's order.

On a terminal: a table whose columns are dropped, least useful first, until it fits the width; figures never wrap
and are never cut. On a terminal too narrow for the essential columns, or when the output is not a terminal (a log
file, a pipe): one card per candidate, plain lines wrapped between fields, never inside one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from recommender.candidates import DEFAULT_PADDING, CandidateResult, named_as_variant
from recommender.decide.comparison import Outcome
from recommender.decide.cost import cost_per_million_tokens_at
from recommender.decide.ranking import RankedCandidate, RankInput
from recommender.decide.recommendation import Recommendation
from recommender.metrics.headline import Headline, ServerStats
from recommender.metrics.payload_lengths import cost_per_million_tokens
from recommender.metrics.stop_reason import StopReason
from recommender.report.columns import (
    AVG_BATCH_SIZE,
    BOTH,
    COMPUTE_TIME,
    COST_PER_MILLION,
    COST_PER_MILLION_OUTPUT_TOKENS,
    COST_PER_MILLION_TOKENS,
    COST_PER_MILLION_TOTAL_TOKENS,
    ERROR_RATE,
    GENERATION_LATENCIES,
    GOODPUT,
    INPUT_TOKENS,
    MAX_INVOCATIONS,
    MODEL_LATENCY,
    OUTPUT_TPS,
    OUTPUT_TPS_PER_USER,
    QUEUE_TIME,
    REQUEST_THROUGHPUT,
    EndpointKind,
    Metric,
)

CARD_INDENT = "   "
VERDICT_MIN_WIDTH = 16  # the one text column that may wrap
NAMING = (
    "configuration pt-db-ig2-mbs8 = optimization (pt / onnx / trt), dynamic batching on or off (db / nodb), "
    "Triton instance group 2, max batch size 8. "
)
PADDING_NAMING = (
    "A suffix names a padding other than max: -buckets (the next power of two), -none (each request at its own "
    "length). "
)
LEGEND = (
    "MaxInvocations: mean invocations/min over the steady-state "
    "windows (all repeats) of the highest load level within the limits; ± is its 95 % interval, over n repeats, "
    "or over n windows when there are fewer than 3 repeats (window-to-window noise only, on an effective n from "
    "their autocorrelation); each figure 95 %, both together at least 90 %. ModelLatency is the mean of the level's "
    "window percentiles, over the requests of those windows. breached = repeats "
    "whose own windows at that level breach the limits. stable = the level's mean known within the stability "
    "tolerance, with no trend. tied = intervals overlap (indistinguishable at this noise level)."
)


def legend(results: list[CandidateResult]) -> str:
    """LEGEND, with how a configuration is named when a candidate is named so (a Triton variant of the grid; not a
    stack's engine or an imported endpoint, named for what it is)."""
    named = any(named_as_variant(str(r.config.get("optimization", ""))) for r in results)
    padded = any(r.config.get("padding", DEFAULT_PADDING) != DEFAULT_PADDING for r in results)
    return (NAMING if named else "") + (PADDING_NAMING if named and padded else "") + LEGEND


@dataclass(frozen=True)
class TableRow:
    """One candidate as printed: where the ranking put it, and what its run measured."""

    rank: int | None  # None: excluded
    entry: RankInput
    ranked: RankedCandidate | None
    reasons: tuple[str, ...]
    headline: Headline
    server: ServerStats


@dataclass(frozen=True)
class TableColumn:
    label: str
    priority: int  # 1 is always shown; the highest numbers are dropped first when the width is short
    cell: Callable[[TableRow, Context], str]
    wraps: bool = False  # only text wraps; a figure never does
    kinds: frozenset[EndpointKind] = BOTH  # the endpoint kinds it is shown for (its metric's, report/columns.py)


@dataclass(frozen=True)
class Context:
    percentile: str


def rows_of(rec: Recommendation, results: list[CandidateResult]) -> list[TableRow]:
    """Ranked candidates in rank order, then the excluded ones, each with its stored measurement."""
    by_key = {r.key: r for r in results}
    rows = [_row(r.rank, r.candidate, r, (), by_key) for r in rec.ranking.ranked]
    return rows + [_row(None, e.candidate, None, e.reasons, by_key) for e in rec.ranking.excluded]


def _row(
    rank: int | None,
    entry: RankInput,
    ranked: RankedCandidate | None,
    reasons: tuple[str, ...],
    by_key: dict[str, CandidateResult],
) -> TableRow:
    result = by_key.get(entry.key)
    headline = (result.headline if result else None) or Headline()
    return TableRow(rank, entry, ranked, reasons, headline, result.server if result else ServerStats())


# --- cells ---------------------------------------------------------------------------------------------------------


def _rank(row: TableRow, _: Context) -> str:
    return str(row.rank) if row.rank else "-"


def _max_invocations(row: TableRow, _: Context) -> str:
    """What the ranking used (ranked), or why there is none (excluded): `none (X over)` = X/min above the limits."""
    h, value = row.headline, row.entry.invocations_per_minute
    if row.ranked is None and h.max_invocations is None:
        return f"none ({MAX_INVOCATIONS.format(value)} over)" if value else "-"
    interval = h.ipm_interval  # the figure is MaxInvocations (pooled windows), as everywhere
    if value and interval is not None and interval.known:
        if MAX_INVOCATIONS.format(interval.mean) != MAX_INVOCATIONS.format(value):  # repeats of unequal window counts
            low, high = MAX_INVOCATIONS.format(interval.low), MAX_INVOCATIONS.format(interval.high)
            return f"{MAX_INVOCATIONS.format(value)} ({low} to {high})"  # a ± around it would misstate the interval
        half_width = (interval.high - interval.low) / 2
        return f"{MAX_INVOCATIONS.format(value)} ± {MAX_INVOCATIONS.format(half_width)}"
    return MAX_INVOCATIONS.format(value) if value else "-"


def _interval_n(row: TableRow, _: Context) -> str:
    interval = row.headline.ipm_interval
    if interval is None or not interval.known:
        return "-"
    effective = f" (effective {interval.n_eff:.1f})" if interval.n_eff is not None else ""
    return f"n={interval.n:,} {interval.counts}{effective}"


def _latency(row: TableRow, ctx: Context) -> str:
    return MODEL_LATENCY.format(row.entry.model_latency_ms)


def _samples(row: TableRow, _: Context) -> str:
    """What ModelLatency is: the mean of the level's window percentiles, and the requests those windows hold (the
    percentile's samples; not the n of the mean)."""
    h = row.headline
    if not h.samples:
        return "-"
    requests = f"{h.samples:,} req"
    return f"{h.windows.at_level:,} win, {requests}" if h.windows.at_level else requests


def _breached(row: TableRow, _: Context) -> str:
    h = row.headline
    return f"{h.repeats_breached} of {h.repeats}" if h.requests else "-"


def _errors(row: TableRow, _: Context) -> str:
    return ERROR_RATE.format(row.headline.error_rate) if row.headline.requests or row.rank else "-"


def _stable(row: TableRow, _: Context) -> str:
    return {True: "yes", False: "no", None: "-"}[row.headline.stable]


def _stability_reason(row: TableRow, _: Context) -> str:
    stability = row.headline.stability
    return stability.reason if stability is not None and stability.reason else "-"


def _stopped(row: TableRow, _: Context) -> str:
    h = row.headline
    if not h.requests:
        return "-"
    if h.stop_reason:
        return StopReason.parse(h.stop_reason).label
    if h.from_top_stop is not None:
        return f"from the top down to load {h.from_top_stop:g}"
    return "known (precision reached)" if h.phase_index in h.known_levels else "end of traffic"


def _server_split(row: TableRow, _: Context) -> str:
    """Average server time per request at MaxInvocations: queue / compute (input + infer + output), in ms."""
    parts = row.server.time_per_request_us()
    queue = parts["queue"]
    compute = [v for name in ("input", "infer", "output") if (v := parts[f"compute_{name}"]) is not None]
    if queue is None or len(compute) < 3:
        return "-"
    return f"{QUEUE_TIME.format(queue / 1000)} / {COMPUTE_TIME.format(sum(compute) / 1000)}"


def _batch(row: TableRow, _: Context) -> str:
    size = row.server.batch_size()
    return AVG_BATCH_SIZE.format(size) if size else "-"


def _score(row: TableRow, _: Context) -> str:
    return f"{row.ranked.score:.3f}" if row.ranked else "-"


def _cost(row: TableRow, _: Context) -> str:
    if row.ranked is None:
        return "-"
    return (
        "unpriced" if row.ranked.cost_per_million is None else COST_PER_MILLION.with_unit(row.ranked.cost_per_million)
    )


def _tokens(row: TableRow, _: Context) -> str:
    """Input tokens per second at MaxInvocations (ranked), '-' when excluded or the payload was not recorded."""
    return INPUT_TOKENS.format(row.entry.input_tokens_per_second) if row.ranked else "-"


def _cost_per_tokens(row: TableRow, _: Context) -> str:
    if row.ranked is None or row.entry.mean_input_tokens is None:
        return "-"
    value = cost_per_million_tokens(row.ranked.cost_per_million, row.entry.mean_input_tokens)
    return "unpriced" if value is None else COST_PER_MILLION_TOKENS.with_unit(value)


def _generated(metric: Metric) -> Callable[[TableRow, Context], str]:
    """A generation figure's cell: its value at the candidate's level, in the catalog's format."""
    return lambda row, _: metric.format(row.entry.generated(metric.figure))


def _generated_at(family: str) -> Callable[[TableRow, Context], str]:
    """A generation latency's cell at the decision percentile (`family`: ttft, itl, e2e)."""
    by_figure = {m.figure: m for m in GENERATION_LATENCIES}
    return lambda row, ctx: by_figure[f"{family}_ms.{ctx.percentile}"].format(
        row.entry.generated(f"{family}_ms.{ctx.percentile}")
    )


def _generation_cost(metric: Metric, tokens: Callable[[RankInput], float | None]) -> Callable[[TableRow, Context], str]:
    """A ranked generative candidate's cost per million tokens ('unpriced' without a price)."""

    def cell(row: TableRow, _: Context) -> str:
        if row.ranked is None:
            return "-"
        value = cost_per_million_tokens_at(row.entry.cost_per_hour, tokens(row.entry))
        return "unpriced" if value is None else metric.with_unit(value)

    return cell


def _generation_column(metric: Metric, priority: int) -> TableColumn:
    return TableColumn(metric.short, priority, _generated(metric), kinds=metric.kinds)


def _latency_column(family: str, priority: int) -> TableColumn:
    """TTFT / ITL / E2E at the decision percentile: the catalog's short header with the percentile left open."""
    metric = next(m for m in GENERATION_LATENCIES if m.figure.startswith(f"{family}_ms."))
    label = metric.short.rsplit(" ", 1)[0] + " {p}"
    return TableColumn(label, priority, _generated_at(family), kinds=metric.kinds)


def _pareto(row: TableRow, _: Context) -> str:
    return "yes" if row.ranked and row.ranked.pareto else "-"


def _verdict(row: TableRow, ctx: Context) -> str:
    """recommended / tied / how far below the best (only where intervals separate) / why excluded."""
    if row.ranked is None:
        return "excluded: " + "; ".join(row.reasons or ("not ranked",))
    if row.rank == 1:
        return "recommended"
    if row.ranked.tied_with_winner:
        return "tied with #1"
    versus = row.ranked.versus  # the ranking's own comparison (decide/), the one the justification states
    throughput = versus.metric("throughput")
    if throughput is None:
        return "same throughput as #1"
    if throughput.outcome is Outcome.NO_ESTIMATE or throughput.relative is None:
        return f"no noise estimate (repeats: {versus.repeats})"
    if throughput.outcome is Outcome.TIED:
        return "tied with #1"
    noise = " (window noise only)" if versus.window_noise else ""
    return f"{throughput.relative:+.0%} vs #1{noise}"


EMBEDDING_ONLY = MAX_INVOCATIONS.kinds  # the embedding figures' columns (report/columns.py)
COLUMNS = (  # in reading order; the number is the priority (1 always shown, higher dropped first when narrow);
    # the metrics' labels are the catalog's short headers (report/columns.py); a column is shown for its kinds
    TableColumn("rank", 1, _rank),
    TableColumn("configuration", 1, lambda row, _: row.entry.name),
    TableColumn(MAX_INVOCATIONS.short, 1, _max_invocations, kinds=EMBEDDING_ONLY),
    _generation_column(GOODPUT, 1),
    _generation_column(OUTPUT_TPS, 1),
    _generation_column(OUTPUT_TPS_PER_USER, 2),
    _latency_column("ttft", 1),
    _latency_column("itl", 1),
    _latency_column("e2e", 2),
    TableColumn(INPUT_TOKENS.short, 2, _tokens, kinds=INPUT_TOKENS.kinds),
    TableColumn(MODEL_LATENCY.short, 1, _latency, kinds=MODEL_LATENCY.kinds),
    TableColumn("verdict", 1, _verdict, wraps=True),
    TableColumn("score", 2, _score),
    TableColumn(COST_PER_MILLION.short, 2, _cost),
    TableColumn(COST_PER_MILLION_TOKENS.short, 3, _cost_per_tokens, kinds=COST_PER_MILLION_TOKENS.kinds),
    TableColumn(
        COST_PER_MILLION_OUTPUT_TOKENS.short,
        2,
        _generation_cost(COST_PER_MILLION_OUTPUT_TOKENS, lambda c: c.generated("output_tps")),
        kinds=COST_PER_MILLION_OUTPUT_TOKENS.kinds,
    ),
    TableColumn(
        COST_PER_MILLION_TOTAL_TOKENS.short,
        3,
        _generation_cost(COST_PER_MILLION_TOTAL_TOKENS, lambda c: c.total_tps),
        kinds=COST_PER_MILLION_TOTAL_TOKENS.kinds,
    ),
    _generation_column(REQUEST_THROUGHPUT, 3),
    TableColumn("± over", 3, _interval_n),
    TableColumn("{p} mean over", 4, _samples, kinds=EMBEDDING_ONLY),
    TableColumn("breached", 3, _breached),
    TableColumn(ERROR_RATE.short, 3, _errors),
    TableColumn("stable", 3, _stable),
    TableColumn("unstable because", 6, _stability_reason, wraps=True),
    TableColumn(
        f"{QUEUE_TIME.short} / {COMPUTE_TIME.short} {QUEUE_TIME.unit}", 4, _server_split, kinds=QUEUE_TIME.kinds
    ),
    TableColumn(AVG_BATCH_SIZE.short, 4, _batch, kinds=AVG_BATCH_SIZE.kinds),
    TableColumn("stopped", 5, _stopped),
    TableColumn("pareto", 5, _pareto),
)


INSTANCE_TYPE = TableColumn("instance type", 1, lambda row, _: row.entry.instance_type)


def columns_for(rows: list[TableRow]) -> tuple[TableColumn, ...]:
    """The columns of the rows' endpoint kind (generative when a candidate streamed generations), with the instance
    type after the configuration when the candidates ran on more than one target."""
    kind: EndpointKind = "generative" if any(row.entry.generative for row in rows) else "embedding"
    shown = COLUMNS if len({row.entry.config.get("target", "") for row in rows}) <= 1 else WITH_INSTANCE_TYPE
    return tuple(column for column in shown if kind in column.kinds)


WITH_INSTANCE_TYPE = (*COLUMNS[:2], INSTANCE_TYPE, *COLUMNS[2:])


# --- layout --------------------------------------------------------------------------------------------------------


def ranking_view(rec: Recommendation, results: list[CandidateResult], console: Console) -> Table | Text:
    """The table when the console is a terminal wide enough for its essential columns, else the cards."""
    rows = rows_of(rec, results)
    ctx = Context(rec.percentile)
    columns = columns_for(rows)
    cells = {column.label: [column.cell(row, ctx) for row in rows] for column in columns}
    if console.is_terminal:
        table = fitting_table(rec, cells, ctx, console)
        if table is not None:
            return table
    return cards(rows, cells, ctx, console.width)


def fitting_table(rec: Recommendation, cells: dict[str, list[str]], ctx: Context, console: Console) -> Table | None:
    """The table with the columns that fit the console, dropping the highest priority numbers first; None when even
    the priority-1 columns do not fit."""
    shown = [c for c in WITH_INSTANCE_TYPE if c.label in cells]
    while sum(_width(c, cells, ctx) + 3 for c in shown) + 1 > console.width:  # padding 1 + 1 and a border each
        droppable = [c for c in shown if c.priority > 1]
        if not droppable:
            return None
        shown.remove(max(reversed(droppable), key=lambda c: c.priority))
    return _table(rec, cells, shown, ctx)


def _width(column: TableColumn, cells: dict[str, list[str]], ctx: Context) -> int:
    """A figure column is as wide as its header or its widest cell (it wraps neither); a text column may shrink."""
    if column.wraps:
        return VERDICT_MIN_WIDTH
    return max([len(column.label.format(p=ctx.percentile)), *(len(v) for v in cells[column.label])])


def _table(rec: Recommendation, cells: dict[str, list[str]], shown: list[TableColumn], ctx: Context) -> Table:
    table = Table(title=_title(rec), title_justify="left")
    for column in shown:
        figure = not column.wraps
        table.add_column(
            column.label.format(p=ctx.percentile),
            justify="right" if figure and column.label != "configuration" else "left",
            no_wrap=figure,
            overflow="fold",
            min_width=_width(column, cells, ctx),
        )
    for index in range(len(next(iter(cells.values())))):
        table.add_row(*(Text(cells[c.label][index]) for c in shown))  # Text: a reason is never read as markup
    return table


def cards(rows: list[TableRow], cells: dict[str, list[str]], ctx: Context, width: int) -> Text:
    """One card per candidate: a heading line, then `label value` fields wrapped between fields."""
    lines = []
    for index, row in enumerate(rows):
        lines.append(f"{'#' + cells['rank'][index] if row.rank else '-'} {row.entry.name}: {cells['verdict'][index]}")
        fields = [
            f"{c.label.format(p=ctx.percentile)} {cells[c.label][index]}"
            for c in WITH_INSTANCE_TYPE
            if c.label in cells and c.label not in ("rank", "configuration", "verdict") and cells[c.label][index] != "-"
        ]
        lines += _wrapped(fields, max(width, 40) - len(CARD_INDENT))
    return Text("\n".join(lines))


def _wrapped(fields: list[str], width: int) -> list[str]:
    lines, current = [], ""
    for field in fields:
        candidate = f"{current} · {field}" if current else field
        if current and len(candidate) > width:
            lines.append(CARD_INDENT + current)
            candidate = field
        current = candidate
    return lines + ([CARD_INDENT + current] if current else [])


def _title(rec: Recommendation) -> str:
    return f"{rec.experiment}: ranked within {rec.ranking.limits.within()}, error rate <= {rec.max_error_rate:.2%}"


def print_decision(console: Console, rec: Recommendation, results: list[CandidateResult]) -> None:
    """What `run` and `rank` print: the ranking, the legend, the recommendation in words and its notes (sentences
    are soft-wrapped: one line each in a log file, wrapped by the terminal on screen)."""
    view = ranking_view(rec, results, console)
    if isinstance(view, Text):
        console.print(_title(rec), highlight=False, markup=False, soft_wrap=True)
    console.print(view, highlight=False, soft_wrap=isinstance(view, Text))
    console.print(legend(results), highlight=False, markup=False, style="dim", soft_wrap=True)
    weights = ", ".join(f"{name} {weight:.0%}" for name, weight in rec.ranking.weights.items())
    console.print(
        f"recommendation (weights {weights}): {rec.justification}", highlight=False, markup=False, soft_wrap=True
    )
    for line in ([rec.tie_notice] if rec.tie_notice else []) + list(rec.notes):
        console.print(f"note: {line}", style="yellow", highlight=False, markup=False, soft_wrap=True)
