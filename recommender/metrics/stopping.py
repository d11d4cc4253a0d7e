"""Stop conditions (SageMaker StoppingConditions semantics), judged on the steady-state windows measured so far.

Pure: the load child calls `stop_reason` at the end of every window and ends the test when it returns a reason.
"""

from __future__ import annotations

from recommender.metrics.precision import LookPrecision, looks_between, spread
from recommender.metrics.rules import Rules
from recommender.metrics.steady import Window
from recommender.metrics.stop_reason import StopKind, StopReason


def stop_reason(windows: list[Window], planned_windows: dict[int, int], rules: Rules) -> StopReason | None:
    """Why the load should stop now, or None. `planned_windows`: phase index -> windows that phase will have."""
    if not windows:
        return None
    for check in (_latency_breached, _errors_above, _max_invocations_reached):
        reason = check(windows, rules)
        if reason:
            return reason
    flat = _flat_invocations(windows, planned_windows, rules) if rules.stop.flat else None
    return flat or _precision_reached(windows, planned_windows, rules)


def _latency_breached(windows: list[Window], rules: Rules) -> StopReason | None:
    """`stable_windows` consecutive windows, all above the threshold (a single slow window is not enough)."""
    limits, count = rules.limits, rules.windows.stable_windows
    last = windows[-count:]
    if not rules.stop.latency or len(last) < count:
        return None
    latencies = [w.latency(limits.percentile) for w in last]
    if all(v is not None and v > limits.threshold_ms for v in latencies):
        shown = ", ".join(f"{v:.1f}" for v in latencies)
        figures = (
            f"{limits.percentile} above {limits.threshold_ms:g} ms in {len(last)} consecutive windows ({shown} ms)"
        )
        return StopReason(StopKind.LATENCY, figures)
    return None


def _errors_above(windows: list[Window], rules: Rules) -> StopReason | None:
    limit, count = rules.limits.max_error_rate, rules.windows.stable_windows
    last = windows[-count:]
    if not rules.stop.errors or len(last) < count:
        return None
    requests = sum(w.stats.requests for w in last)
    errors = sum(w.stats.errors for w in last)
    if requests and errors / requests > limit:
        figures = f"{errors / requests:.1%} over the last {len(last)} windows, above the {limit:.1%} limit"
        return StopReason(StopKind.ERROR_RATE, figures)
    return None


def _max_invocations_reached(windows: list[Window], rules: Rules) -> StopReason | None:
    limit = rules.stop.max_invocations
    if limit is not None and windows[-1].ipm >= limit:
        figures = f"a window reached {windows[-1].ipm:.0f} invocations/min (limit {limit:g})"
        return StopReason(StopKind.MAX_INVOCATIONS, figures)
    return None


def _flat_invocations(windows: list[Window], planned_windows: dict[int, int], rules: Rules) -> StopReason | None:
    """The current level, once it has enough windows, is no faster than the previous one although its load is higher."""
    current = windows[-1].phase_index
    mine = [w for w in windows if w.phase_index == current]
    previous = [w for w in windows if w.phase_index == current - 1]
    if len(mine) < min(rules.windows.stable_windows, planned_windows.get(current, 1)):
        return None
    return flat_between(previous, mine, rules)


def flat_between(previous: list[Window], current: list[Window], rules: Rules) -> StopReason | None:
    """The flat-invocations stop between two levels' windows: `current`'s mean IPM grows by less than
    `flat_tolerance` over `previous`'s although its load is higher (None: no previous level, or growth). Within one
    load run the child judges it at the end of every window; in precision mode, where each level is a load run of
    its own, the measurement judges it between level runs (measurement/repeats.py)."""
    if not previous or not current or current[-1].load <= previous[-1].load:
        return None
    now, before = _mean_ipm(current), _mean_ipm(previous)
    tolerance = rules.stop.flat_tolerance
    if now <= before * (1 + tolerance):
        figures = (
            f"{now:.0f}/min at load {current[-1].load:g} vs {before:.0f}/min at {previous[-1].load:g} "
            f"(growth below {tolerance:.0%})"
        )
        return StopReason(StopKind.FLAT_INVOCATIONS, figures)
    return None


def _precision_reached(windows: list[Window], planned_windows: dict[int, int], rules: Rules) -> StopReason | None:
    """Measure until known: the plan's last level, after at least `Rules.first_look` windows, has MaxInvocations
    and its latency percentile known within `known_within` (metrics/precision.py). Only the last level: ending there
    skips no level of the plan (a measurement in precision mode runs each level as a load run of its own)."""
    target, current = rules.stop.known_within, windows[-1].phase_index
    if target is None or current != max(planned_windows):
        return None
    mine = [w for w in windows if w.phase_index == current]
    first = rules.first_look
    if len(mine) < first or len(mine) >= planned_windows[current]:  # the last window ends the level anyway
        return None
    found = level_spread(mine, rules, looks_between(first, planned_windows[current]))
    if not found.within(target):
        return None
    return StopReason(StopKind.PRECISION, f"{found.text(rules.limits.percentile)} within +-{target:.0%}")


def ended_early(reason: StopReason | None, duration_s: float, planned_s: float) -> StopReason | None:
    """The stop to record for a load run that lasted `duration_s` of a plan of `planned_s`: `reason`, unless it is a
    precision stop that took effect only at the plan's end. The load child ends the traffic at its shape's next tick
    (once a second), so figures known in the plan's last second end nothing early: like figures known with the last
    window (`_precision_reached`), the run ran to its end and no stop is recorded (LoadResult.stop_reason: why it
    stopped *before* the end; the headline's known_levels: levels that ended early because known). A limit's stop is
    kept whenever it came: it ends the plan's higher levels (measurement/repeats.ends_plan)."""
    if reason is None or reason.kind is not StopKind.PRECISION or duration_s < planned_s:
        return reason
    return None


def precision_flags(windows: list[Window], rules: Rules, planned: int, stop_reason: str | None) -> list[str]:
    """["precision not reached (...)"] for a level of a precision-mode run that ran its whole planned duration without
    its figures known to `traffic.until_known`; [] otherwise (a level that a limit stopped has its own reason)."""
    target = rules.stop.known_within
    if target is None or stop_reason is not None or not windows:
        return []
    found = level_spread(windows, rules, looks_between(rules.first_look, planned))
    if found.within(target):
        return []
    return [f"precision not reached ({found.text(rules.limits.percentile)}, asked +-{target:.0%})"]


def level_spread(windows: list[Window], rules: Rules, looks: int) -> LookPrecision:
    """The precision of one level's windows (one load run) at a look."""
    return spread(
        [w.ipm for w in windows],
        [w.latency(rules.limits.percentile) for w in windows],
        looks,
        60.0 / rules.windows.window_s,
    )


def _mean_ipm(windows: list[Window]) -> float:
    return sum(w.ipm for w in windows) / len(windows)


def planned_window_counts(spans: list[tuple[int, float, float]]) -> dict[int, int]:
    """Phase index -> number of windows, from metrics.steady.window_spans."""
    counts: dict[int, int] = {}
    for phase, _start, _end in spans:
        counts[phase] = counts.get(phase, 0) + 1
    return counts
