"""Triton's Prometheus /metrics: a parser for the few counters the platform uses, scraped at the start and end of a
load."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

COUNTERS = (
    "nv_inference_request_success",
    "nv_inference_request_failure",
    "nv_inference_count",
    "nv_inference_exec_count",
    "nv_inference_request_duration_us",
    "nv_inference_queue_duration_us",
    "nv_inference_compute_input_duration_us",
    "nv_inference_compute_infer_duration_us",
    "nv_inference_compute_output_duration_us",
)
_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+([-+0-9.eE]+|NaN|[+-]Inf)\s*(\d+)?$")


def parse_counters(text: str, names: tuple[str, ...] = COUNTERS) -> dict[str, float]:
    """Sum of every sample of each wanted metric over its label sets (all models, versions, GPUs)."""
    totals: dict[str, float] = {}
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match and match.group(1) in names:
            totals[match.group(1)] = totals.get(match.group(1), 0.0) + float(match.group(3))
    return totals


def scrape(url: str | None, timeout_s: float = 5.0) -> dict[str, float] | None:
    """The counters at `url`, or None when there is no URL or it cannot be read (never raises)."""
    if not url:
        return None
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            return parse_counters(response.read().decode("utf-8", "replace"))
    except (OSError, ValueError):
        return None


def counter_delta(before: dict[str, float] | None, after: dict[str, float] | None) -> dict[str, Any]:
    """after - before per counter, plus per-request averages of the queue and compute durations."""
    if before is None or after is None:
        return {"available": False}
    delta = {name: after.get(name, 0.0) - before.get(name, 0.0) for name in after}
    successes = delta.get("nv_inference_request_success", 0.0)
    averages = {
        f"avg_{name.removeprefix('nv_inference_')}": delta[name] / successes
        for name in delta
        if name.endswith("_duration_us") and successes > 0
    }
    return {"available": True, **delta, **averages}
