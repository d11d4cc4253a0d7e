"""One Limits (from the experiment file, changed only by override), the measurement's Rules as the load child gets
them, the headline as its measured and decided parts, and one decision per run."""

from __future__ import annotations

import json

import pytest

from recommender.errors import SpecError
from recommender.metrics.headline import Headline, Measured, WindowCount
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits
from recommender.metrics.rules import Rules, StopRules, WindowRules
from recommender.review import with_limits
from recommender.spec import ExperimentSpec

SPEC = ExperimentSpec.model_validate(
    {
        "name": "limits",
        "latency_threshold": {"percentile": "p90", "ms": 120},
        "max_error_rate": 0.02,
        "traffic": {"warmup_seconds": 3, "window_seconds": 4, "stopping": {"latency": False}},
    }
)


def test_limits_come_from_the_experiment_file():
    assert Limits.from_spec(SPEC) == Limits("p90", 120.0, 0.02)


def test_override_replaces_only_what_is_given_and_keeps_the_record_frozen():
    limits = Limits.from_spec(SPEC)
    assert limits.override() is limits
    assert limits.override(threshold_ms=30) == Limits("p90", 30.0, 0.02)
    assert limits.override(percentile="p99", max_error_rate=0.0) == Limits("p99", 120.0, 0.0)
    with pytest.raises(AttributeError):
        limits.threshold_ms = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"max_error_rate": 2.0}, "max error rate must be between 0 and 1"),
        ({"threshold_ms": 0}, "latency threshold must be above 0 ms"),
        ({"percentile": "p42"}, "latency percentile must be one of p50, p90, p95, p99"),
    ],
)
def test_a_bad_override_is_a_spec_error(change, said):
    with pytest.raises(SpecError, match=said):
        Limits().override(**change)


def test_rules_split_window_and_stop_rules_and_travel_as_json():
    rules = Rules.from_spec(SPEC)
    assert rules.limits == Limits("p90", 120.0, 0.02)
    assert (rules.windows.warmup_s, rules.windows.window_s) == (3.0, 4.0)
    assert not rules.stop.latency and rules.stop.errors and rules.stop_limits == rules.limits
    assert Rules.from_json(rules.to_json()) == rules
    assert Rules(stop=StopRules(latency=False, errors=False)).stop_limits is None


def _records(latency: float) -> list[WindowRecord]:
    server = {"queue_us": 10.0, "avg_batch_size": 2.0}
    return [
        WindowRecord(
            0, phase, i, float(phase + 1), 200, 0, 200, 600.0 * (phase + 1), {"p95": latency * (phase + 1)}, server
        )
        for phase in range(2)
        for i in range(4)
    ]


def test_one_decision_holds_the_levels_the_figures_and_the_server_figures_at_the_level():
    measured = Measured(repeats=1, requests=1600, windows=WindowCount(5.0, 8, 8))
    decision = decide(_records(40.0), measured, Limits("p95", 50, 0.01), WindowRules())
    assert len(decision.levels) == 2 and decision.chosen is decision.levels[0] is decision.shown
    assert decision.figures.max_invocations == pytest.approx(600.0)
    assert decision.server_stats({"avg_batch_size": 1.5}) == {
        "avg_batch_size": 1.5,
        "at_max_invocations": {"queue_us": 10.0, "avg_batch_size": 2.0},
    }
    headline = decision.headline
    assert headline.measured == measured  # the measured part is kept as it was
    assert (headline.threshold_ms, headline.windows.at_level, headline.requests) == (50, 4, 1600)


def test_the_stored_shape_is_flat_and_reads_back_whichever_part():
    decision = decide(_records(40.0), Measured(stop_limits=Limits()), Limits("p95", 100, 0.01))
    stored = json.loads(json.dumps(decision.headline.to_dict()))
    assert "measured" not in stored and "figures" not in stored and stored["threshold_ms"] == 100
    assert stored["stop_limits"] == {"percentile": "p95", "threshold_ms": 500.0, "max_error_rate": 0.01}
    assert Headline.from_dict(stored) == decision.headline
    again = decide(_records(40.0), Headline.from_dict(stored).measured, Limits("p95", 100, 0.01))
    assert again.headline == decision.headline  # re-deciding the stored record under the same limits changes nothing


def test_the_decided_spec_states_the_limits_without_being_rebuilt():
    assert with_limits(SPEC, Limits.from_spec(SPEC)) is SPEC
    decided = with_limits(SPEC, Limits("p99", 30.0, 0.0))
    assert Limits.from_spec(decided) == Limits("p99", 30.0, 0.0)
    assert decided.traffic == SPEC.traffic and decided.objectives == SPEC.objectives
