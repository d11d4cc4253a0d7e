"""The words the numbers are measured and decided in, defined once: the latency percentiles.

The metric catalog (each reported figure's labels, unit, format and accessor) is recommender/report/columns.py,
read by the CLI, the report and the dashboard.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal

Percentile = Literal["p50", "p90", "p95", "p99"]

# Latency percentiles the platform measures, stores and can decide on: name -> q (per cent).
PERCENTILES: Mapping[str, float] = MappingProxyType({"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0})
PERCENTILE_NAMES: tuple[str, ...] = tuple(PERCENTILES)
DEFAULT_PERCENTILE: Percentile = "p95"
