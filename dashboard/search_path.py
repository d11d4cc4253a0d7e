"""The search path of an experiment: every finished run under the current protocol in the order it ran (adaptive
search: the brief load searches, then the final measurements of the candidates left in the race), with its figures;
pruned candidates keep their partial figures and the reason. Pure: rows from the store's results."""

from __future__ import annotations

from typing import Any

import pandas as pd

from recommender.candidates import CandidateResult


def search_path(history: list[CandidateResult], protocol_key: str | None) -> pd.DataFrame:
    """One row per finished run of the protocol, in run order (the order the search tried them)."""
    runs = [r for r in history if protocol_key is None or r.protocol_key == protocol_key]
    return pd.DataFrame([_row(step, r) for step, r in enumerate(runs, start=1)], columns=COLUMNS)


COLUMNS = (
    "step",
    "configuration",
    "status",
    "repeats",
    "level",
    "MaxInvocations",
    "interval low",
    "interval high",
    "interval",
    "duration (s)",
    "reason",
)


def _row(step: int, r: CandidateResult) -> dict[str, Any]:
    h = r.headline
    interval = h.ipm_interval if h else None
    return {
        "step": step,
        "configuration": r.name,
        "status": r.status,
        "repeats": h.repeats if h else None,
        "level": h.level_load if h else None,
        "MaxInvocations": (h.max_invocations if h.max_invocations is not None else h.invocations_per_minute)
        if h
        else None,
        "interval low": interval.low if interval else None,
        "interval high": interval.high if interval else None,
        "interval": interval.label if interval else None,
        "duration (s)": r.duration_s,
        "reason": r.reason or "",
    }
