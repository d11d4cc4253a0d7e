"""The ranked results table printed at the end of a run (the same order as `recommender rank`).

Per candidate: MaxInvocations with its 95 % interval (when measured more than once), the latency at it, stability,
why the load stopped, and the server-side split of a request's time (queue vs compute) at MaxInvocations.
Candidates whose intervals overlap the best one's are shown as tied: no "X % lower" inside the noise.
"""

from __future__ import annotations

from rich.table import Table

from recommender.metrics.headline import Headline
from recommender.metrics.intervals import Interval, compare
from recommender.candidates import CandidateResult, instance_group_count_of

STATUS_ORDER = {"ok": 0, "failed": 1, "interrupted": 2, "skipped": 3, "pending": 4}
COLUMNS = ("rank", "configuration", "opt", "batching", "inst", "mbs", "MaxInvocations/min",
           "{p} ms", "errors", "stable", "stopped", "queue / compute ms", "avg batch", "vs best", "status")
NO_WRAP = {"configuration"}
LEFT = {"configuration", "opt", "stable", "stopped", "vs best", "status"}


def order(results: list[CandidateResult]) -> list[CandidateResult]:
    """Candidates within the latency threshold first (highest invocations per minute first), then the rest."""

    def sort_key(r: CandidateResult):
        h = r.headline
        return (STATUS_ORDER.get(r.status, 9), not (h and h.within_threshold),
                -(h.invocations_per_minute if h else 0.0), r.name)

    return sorted(results, key=sort_key)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


CONFIGURATION_PARTS = ("opt", "batching", "inst", "mbs")  # also spelled out by the name, e.g. pt-db-ig2-mbs8
COMPACT_BELOW = 170  # terminal columns under which the configuration parts are left to the name


def results_table(results: list[CandidateResult], percentile: str, title: str, width: int = 200) -> Table:
    table = Table(title=title, title_justify="left")
    compact = width < COMPACT_BELOW
    shown = [i for i, column in enumerate(COLUMNS) if not (compact and column in CONFIGURATION_PARTS)]
    for i in shown:
        column = COLUMNS[i]
        table.add_column(column.format(p=percentile), justify="left" if column in LEFT else "right",
                         no_wrap=column in NO_WRAP, overflow="ellipsis")
    ranked = order(results)
    best = next((_interval(r) for r in ranked if r.status == "ok" and r.headline and r.headline.within_threshold), None)
    rank = 0
    for r in ranked:
        ok = r.status == "ok"
        rank += ok
        row = _row(r, rank if ok else None, percentile, best)
        table.add_row(*(row[i] for i in shown))
    table.caption = ("configuration pt-db-ig2-mbs8 = PyTorch (pt / onnx / trt), dynamic batching on (db / nodb), "
                     "instance group 2, max batch size 8. MaxInvocations: highest invocations/min of a steady-state window within the threshold; "
                     "+- is the 95 % interval over repeats; tied = intervals overlap (indistinguishable at this noise level)")
    return table


def _row(r: CandidateResult, rank: int | None, percentile: str, best: Interval | None) -> list[str]:
    h, c = r.headline or Headline(), r.config
    ok = rank is not None
    within = ok and h.within_threshold
    batching = "on" if c.get("dynamic_batching") else "off"
    avg_batch = r.server.batch_size()
    return [
        str(rank) if ok else "-", r.name, c["optimization"], batching, str(instance_group_count_of(c)), str(c["max_batch_size"]),
        _max_invocations(h) if ok else "-",
        _latency(h, percentile) if ok else "-",
        f"{h.error_rate:.2%}" if ok else "-",
        ("yes" if h.stable else "unstable") if ok and h.stable is not None else "-",
        (h.stop_reason or "end of traffic").split(":")[0] if ok else "-",
        _server_split(r) if ok else "-",
        f"{avg_batch:.2f}" if avg_batch else "-",
        ("best" if rank == 1 else compare(best, _interval(r))) if within else "-",
        r.status if within else _status_text(r),
    ]


def _max_invocations(h: Headline) -> str:
    interval, value = h.ipm_interval, h.max_invocations
    if value is None:
        return f"none ({h.invocations_per_minute:.0f} over)"
    if interval is not None and interval.known:
        return f"{interval.mean:.0f} +- {(interval.high - interval.low) / 2:.0f}"
    return f"{value:.0f}"


def _latency(h: Headline, percentile: str) -> str:
    latency = h.model_latency_ms or h.latency(percentile)
    samples = h.samples
    return _ms(latency) + (f" (n={samples})" if samples else "")


def _server_split(r: CandidateResult) -> str:
    """Average server time per request at MaxInvocations: queue / compute (input + infer + output), in ms."""
    parts = r.server.time_per_request_us()
    queue = parts["queue"]
    compute = [parts[f"compute_{name}"] for name in ("input", "infer", "output")]
    if queue is None or any(v is None for v in compute):
        return "n/a"
    return f"{queue / 1000:.1f} / {sum(compute) / 1000:.1f}"


def _interval(r: CandidateResult) -> Interval | None:
    return r.headline.ipm_interval if r.headline else None


def _status_text(r: CandidateResult) -> str:
    """A short status: the first reason only (`recommender rank` lists every reason in full)."""
    if r.status == "ok":
        notes = (r.headline.notes if r.headline else ()) or ("no window within the threshold",)
        return "over threshold: " + _first_clause(notes[-1])
    return f"{r.status}: {_first_clause(r.reason)}" if r.reason else r.status


def _first_clause(text: str) -> str:
    clause = text.strip().splitlines()[0].split("; ")[0]
    return clause if len(clause) <= 90 else clause[:89] + "…"
