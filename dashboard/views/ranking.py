"""Ranking page: the recommended configuration for the chosen settings, and every candidate ranked or excluded."""

from __future__ import annotations

import streamlit as st

from dashboard import decision
from dashboard.decision import GENERATIVE_FIGURES
from dashboard.selection import decision_in_view
from dashboard.text import escape, metric_column, number, show_table
from recommender.decide.ranking import RankInput
from recommender.decide.recommendation import Recommendation
from recommender.metrics.generation import GenerationFigures
from recommender.report.columns import (
    COST_PER_HOUR,
    COST_PER_MILLION,
    COST_PER_MILLION_TOKENS,
    FLEET_SIZE,
    GENERATION_COSTS,
    GOODPUT,
    INPUT_TOKENS,
    MAX_INVOCATIONS,
    MODEL_LATENCY,
    OUTPUT_TPS,
    latencies_at,
)

COLUMNS = {
    "rank": st.column_config.NumberColumn("rank"),
    "name": st.column_config.TextColumn("configuration"),
    MAX_INVOCATIONS.field: metric_column(MAX_INVOCATIONS),
    MODEL_LATENCY.field: metric_column(MODEL_LATENCY),
    "interval": st.column_config.TextColumn(f"95 % interval ({MAX_INVOCATIONS.unit})"),
    FLEET_SIZE.field: metric_column(FLEET_SIZE, f"{FLEET_SIZE.short} for target"),
    "fleet_size_at_point": metric_column(FLEET_SIZE, f"{FLEET_SIZE.short} at the point estimate"),
    COST_PER_HOUR.field: metric_column(COST_PER_HOUR, f"fleet {COST_PER_HOUR.frame}"),
    COST_PER_MILLION.field: metric_column(COST_PER_MILLION),
    INPUT_TOKENS.field: metric_column(INPUT_TOKENS),
    COST_PER_MILLION_TOKENS.field: metric_column(COST_PER_MILLION_TOKENS),
    "score": st.column_config.NumberColumn("score", format="%.3f"),
    "instance_type": st.column_config.TextColumn("instance type"),
    "excluded_reasons": st.column_config.TextColumn("excluded because", width="large"),
    **{m.name: metric_column(m) for m in GENERATIVE_FIGURES},
    **{m.field: metric_column(m) for m in GENERATION_COSTS},
}
# a generative experiment's columns: the catalog's generative figures in place of the embedding ones
EMBEDDING_ONLY = (
    MAX_INVOCATIONS.field,
    "interval",
    INPUT_TOKENS.field,
    MODEL_LATENCY.field,
    COST_PER_MILLION_TOKENS.field,
)

ORDER = (
    "rank",
    "name",
    "instance_type",
    "status",
    *(m.name for m in GENERATIVE_FIGURES),
    "invocations_per_minute",
    "interval",
    "input_tokens_per_second",
    "model_latency_ms",
    "initial_instance_count",
    "fleet_size_at_point",
    "cost_per_hour",
    "cost_per_million",
    "cost_per_million_tokens",
    *(m.field for m in GENERATION_COSTS),
    "score",
    "notes",
    "excluded_reasons",
    "optimization",
    "dynamic_batching",
    "instance_group",
    "max_batch_size",
    "vcpus",
    "gpus",
    "gpu_memory_gib",
    "key",
)


def card(rec: Recommendation) -> None:
    """The recommended configuration at a glance."""
    winner = rec.winner
    with st.container(border=True):
        if winner is None:
            st.warning(f"No recommendation: {escape(rec.no_winner_reason)}")
            return
        c = winner.candidate
        st.subheader(f"Recommended: {escape(c.name)}")
        cost = "unpriced" if rec.capacity is None else f"{rec.capacity.cost_per_hour:,.2f} USD"
        fleet = rec.fleets[c.key]
        metrics = [
            ("Instance type", c.instance_type),
            (f"Instances for {rec.target_ipm:,.0f}/min", str(rec.fleet_size)),
            ("Cost per hour", cost),
            *(_generation_metrics(rec, c.generation) if c.generation is not None else _embedding_metrics(rec, c)),
        ]
        if c.input_tokens_per_second is not None:  # the run recorded its payload (migration 0008)
            metrics.append(("Input tokens per instance", number(c.input_tokens_per_second, 0, "/s")))
        for column, (label, value) in zip(st.columns(len(metrics)), metrics, strict=False):
            column.metric(label, value)
        st.caption(
            f"Instances sized on the {escape(fleet.sized_on)}; {fleet.fleet_size_at_point} at the point estimate. "
            + escape(rec.justification)
        )
        if rec.tie_notice:
            st.warning(f"Tie: {escape(rec.tie_notice)}")
    for note in rec.notes:
        st.caption(f"Note: {escape(note)}")


def _embedding_metrics(rec: Recommendation, c: RankInput) -> list[tuple[str, str]]:
    return [
        (f"{rec.percentile} latency at MaxInvocations", number(c.model_latency_ms, 1, "ms")),
        ("MaxInvocations per instance", number(c.invocations_per_minute, 0, "/min")),
    ]


def _generation_metrics(rec: Recommendation, generation: GenerationFigures) -> list[tuple[str, str]]:
    """Goodput, output tokens/s and TTFT / ITL at the decision percentile, labelled as the catalog labels them."""
    shown = (GOODPUT, OUTPUT_TPS, *(m for m in latencies_at(rec.percentile) if not m.name.startswith("e2e")))
    return [(m.frame, number(generation.value(m.figure), m.digits, "")) for m in shown]


def by_instance_type(frame):
    """The instance-type facet: a filter shown when the candidates ran on more than one instance type."""
    types = sorted(frame["instance_type"].dropna().unique()) if "instance_type" in frame.columns else []
    if len(types) < 2:
        return frame
    chosen = st.multiselect("Instance types", types, default=types, key="ranking-instance-types")
    return frame[frame["instance_type"].isin(chosen)]


def main() -> None:
    view = decision_in_view()
    if view is None:
        return
    rec = view.recommendation
    card(rec)
    st.subheader("All candidates")
    st.caption(
        f"Ranked within {rec.ranking.limits.within()} and error rate <= "
        f"{rec.max_error_rate:.2%}; weights {escape(decision.report(rec).weights)}. Click a header to sort."
    )
    frame = decision.rows_frame(decision.report(rec))
    if frame.empty:
        st.info("No candidates stored for this experiment yet.")
        return
    frame = by_instance_type(frame)
    hidden = EMBEDDING_ONLY if decision.report(rec).kind == "generative" else ()
    order = [c for c in ORDER if c in frame.columns and not frame[c].isna().all() and c not in hidden]
    show_table(frame, hide_index=True, column_config=COLUMNS, column_order=order)


st.title("Ranking")
main()
