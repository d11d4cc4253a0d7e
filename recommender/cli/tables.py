"""The ranked results table printed at the end of a run (and by `recommender results`)."""

from __future__ import annotations

from rich.table import Table

from recommender.store.results import CandidateResult

STATUS_ORDER = {"ok": 0, "failed": 1, "interrupted": 2, "skipped": 3, "pending": 4}


def order(results: list[CandidateResult]) -> list[CandidateResult]:
    """Candidates within the latency threshold first (highest invocations per minute first), then the rest."""

    def sort_key(r: CandidateResult):
        h = r.headline or {}
        return (STATUS_ORDER.get(r.status, 9), not h.get("within_threshold", False),
                -(h.get("invocations_per_minute") or 0.0), r.name)

    return sorted(results, key=sort_key)


def _ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def results_table(results: list[CandidateResult], percentile: str, title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("rank", "configuration", "optimization", "dynamic batching", "instances", "max batch",
                   "invocations/min", f"{percentile} ms", "error rate", "avg batch", "status"):
        table.add_column(column, justify="right" if column not in ("configuration", "status", "optimization") else "left")
    rank = 0
    for r in order(results):
        h, c = r.headline or {}, r.config
        ok = r.status == "ok"
        rank += ok
        batching = "on" if c.get("dynamic_batching") else "off"
        avg_batch = (r.server_stats or {}).get("avg_batch_size")
        status = r.status if ok and h.get("within_threshold") else _status_text(r)
        table.add_row(
            str(rank) if ok else "-", r.name, c["optimization"], batching, str(c["instance_count"]), str(c["max_batch_size"]),
            f"{h['invocations_per_minute']:.0f}" if ok else "-",
            _ms((h.get("latency_ms") or {}).get(percentile)) if ok else "-",
            f"{h.get('error_rate', 0):.2%}" if ok else "-",
            f"{avg_batch:.2f}" if avg_batch else "-",
            status,
        )
    return table


def _status_text(r: CandidateResult) -> str:
    if r.status == "ok":
        return "ok, over threshold: " + "; ".join((r.headline or {}).get("notes", []))
    if not r.reason:
        return r.status
    first_line = r.reason.strip().splitlines()[0]
    return f"{r.status}: {first_line[:160]}"
