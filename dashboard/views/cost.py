"""Cost page: cost per million and the fleet cost at the target load, per configuration and instance type.

Each instance type is priced with recommender.decide.recommendation (target.priced_as), so the figures are the
ones `recommender report` would give for an experiment file priced as that type.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import charts, decision
from dashboard.selection import decision_in_view
from dashboard.text import escape, show_error, show_table
from recommender.decide.recommendation import Recommendation
from recommender.errors import RecommenderError
from recommender.report.columns import COST_PER_HOUR, COST_PER_MILLION, COST_PER_MILLION_TOKENS, FLEET_SIZE

FLEET_COST = f"fleet {COST_PER_HOUR.frame}"  # the fleet that serves the target load
FLEET = f"{FLEET_SIZE.short} for target"

DEFAULT_TYPES = ("ml.c5.xlarge", "ml.g4dn.xlarge", "ml.g5.xlarge")


def cost_rows(rec: Recommendation) -> list[dict]:
    return [
        {
            "configuration": r.name,
            "instance type": r.instance_type,
            FLEET: r.initial_instance_count,
            FLEET_COST: r.cost_per_hour,
            COST_PER_MILLION.frame: r.cost_per_million,
            COST_PER_MILLION_TOKENS.frame: r.cost_per_million_tokens,
            "recommended": r.recommended,
        }
        for r in decision.report(rec).rows
    ]


def pick_types(spec, info_name: str) -> list[str]:
    types = decision.catalog_types()
    own = spec.target.priced_as
    default = [own] if own in types else [t for t in DEFAULT_TYPES if t in types]
    st.caption(
        "Measured throughput priced as each instance type (the benchmark ran on "
        f"{escape(spec.target.instance_type)}); prices from the catalog, see `recommender prices show`."
    )
    return st.multiselect("Instance types", types, default=default, key=f"cost-types:{info_name}")


def main() -> None:
    view = decision_in_view()
    if view is None:
        return
    spec, settings, results, own = view.spec, view.settings, view.results, view.recommendation
    try:
        chosen = pick_types(spec, view.info.name)
        priced = [decision.recommendation(decision.priced_as(spec, t), results, settings) for t in chosen]
    except RecommenderError as error:
        show_error(error)
        return
    recs = ([own] if own.pricing.priced else []) + priced
    frame = pd.DataFrame([row for rec in recs for row in cost_rows(rec)])
    if not own.pricing.priced:
        st.info(
            f"The experiment file leaves {escape(own.pricing.instance_type)} unpriced (not free); pick instance "
            "types above to price the measured throughput."
        )
    if frame.empty:
        st.info("Nothing to price: no candidate is within the limits, or no instance type is picked.")
        return
    st.caption(f"Target load {settings.target_ipm:,.0f} invocations per minute.")
    if frame[COST_PER_MILLION_TOKENS.frame].isna().all():  # runs stored before their payload was (migration 0008)
        frame = frame.drop(columns=COST_PER_MILLION_TOKENS.frame)
    show_table(frame, hide_index=True)
    left, right = st.columns(2)
    left.altair_chart(charts.bars(frame, COST_PER_MILLION.frame, "cost per million inferences (USD)"), width="stretch")
    right.altair_chart(charts.bars(frame, FLEET_COST, "fleet cost per hour at the target (USD)"), width="stretch")


st.title("Cost")
main()
