"""Measure until known (traffic.until_known): the sequential stopping rule on synthetic windows with known answers,
its correction for repeated looks, the flag when a level is not known by its end, the spec's limits, and load runs
joined on one clock."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import yaml

from recommender.errors import SpecError
from recommender.load.result import LoadResult
from recommender.load.shapes import compile_traffic
from recommender.measurement.load_search import measure_level
from recommender.measurement.repeats import ends_plan, from_top_order, join_results, level_runs, measure_once
from recommender.metrics.headline import Headline, Measured, WindowCount
from recommender.metrics.intervals import Interval, t_quantile, t_quantile_95
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits
from recommender.metrics.precision import relative_half_width, repeat_spread
from recommender.metrics.records import RequestLog, Timeline
from recommender.metrics.rules import Rules, StopRules, WindowRules
from recommender.metrics.stop_reason import StopKind
from recommender.metrics.stopping import precision_flags, stop_reason
from recommender.spec import ExperimentSpec
from recommender.spec.loader import load_spec
from recommender.targets.wire import KSERVE
from tests.unit.test_steady import win

RULES = Rules(Limits("p95", 500, 0.01), WindowRules(stable_windows=3), StopRules(known_within=0.05))


def level(ipms: list[float], latencies: list[float], phase: int = 0) -> list:
    return [win(phase, i, ipm, ms) for i, (ipm, ms) in enumerate(zip(ipms, latencies, strict=True))]


def test_the_t_quantile_is_the_table_at_95_percent_and_exact_elsewhere() -> None:
    assert [round(t_quantile(0.95, df), 3) for df in range(1, 31)] == [t_quantile_95(df) for df in range(1, 31)]
    # the Bonferroni quantile for 20 looks, t(1 - 0.05 / 20 / 2, df), as scipy.stats.t.ppf(0.99875, df) gives it
    assert t_quantile(1 - 0.05 / 20, 3) == pytest.approx(9.4649, abs=1e-3)
    assert t_quantile(1 - 0.05 / 20, 10) == pytest.approx(4.0045, abs=1e-3)
    assert t_quantile(0.99, 1) == pytest.approx(63.657, abs=1e-2)


def test_a_steady_level_ends_once_both_figures_are_known() -> None:
    """Known at the sixth window, not the fourth: from 4 windows the interval cannot rule out that they are one lucky
    stretch of correlated windows (the effective n, metrics/intervals.py), however alike they are."""
    ipm = [1000, 1004, 998, 1002, 1001, 999, 1003]
    latency = [20.0, 20.1, 19.9, 20.0, 20.05, 19.95, 20.05]
    steady = level(ipm, latency)
    assert stop_reason(steady[:3], {0: 20}, RULES) is None  # fewer than min_windows (4)
    assert [stop_reason(steady[:n], {0: 20}, RULES) for n in (4, 5)] == [None, None]
    reason = stop_reason(steady[:6], {0: 20}, RULES)
    assert reason is not None and reason.kind is StopKind.PRECISION
    assert "within +-5%" in reason.text and "17 looks" in reason.text and "n=6" in reason.text  # looks: windows 4..20


def test_a_noisy_level_runs_on() -> None:
    noisy = level([1000, 1300, 800, 1200, 900, 1100], [20, 20, 20, 20, 20, 20])
    assert stop_reason(noisy, {0: 20}, RULES) is None
    jumpy_latency = level([1000] * 6, [10, 30, 12, 28, 11, 29])
    assert stop_reason(jumpy_latency, {0: 20}, RULES) is None


def test_the_correction_for_repeated_looks_keeps_running_what_one_look_would_stop() -> None:
    values = [1000, 1040, 960, 1030, 970, 1000, 1010, 990, 1020, 980, 1000, 1005]
    # one look: the 95 % interval over 12 windows is within 5 %; corrected for 40 looks it is not
    assert relative_half_width(values, looks=1) < 0.05 < relative_half_width(values, looks=40)
    windows = level(values, [20.0] * 12)
    assert stop_reason(windows, {0: 13}, RULES) is not None  # 10 looks (windows 4..13)
    assert stop_reason(windows, {0: 43}, RULES) is None  # 40 looks


def test_only_the_plans_last_level_ends_early_and_only_when_asked() -> None:
    steady = level([1000] * 4 + [1001], [20.0] * 5)
    first_of_two = level([1000, 1001, 999, 1000], [20.0] * 4)
    assert stop_reason(first_of_two, {0: 10, 1: 10}, RULES) is None
    assert stop_reason(steady, {0: 20}, Rules(RULES.limits, RULES.windows)) is None  # until_known not set
    assert stop_reason(steady[:4], {0: 4}, RULES) is None  # its last window ends the level anyway


def test_a_level_not_known_by_its_end_is_flagged_and_one_known_is_not() -> None:
    noisy = level([1000, 1300, 800, 1200], [20] * 4)
    [flag] = precision_flags(noisy, RULES, 4, None)
    assert flag.startswith("precision not reached (MaxInvocations +-") and "asked +-5%" in flag
    assert precision_flags(level([1000, 1001, 999, 1000], [20.0] * 4), RULES, 4, None) == []
    assert precision_flags(noisy, RULES, 4, "latency: p95 above 500 ms in 3 consecutive windows (...)") == []
    assert precision_flags(noisy, Rules(RULES.limits, RULES.windows), 4, None) == []


def test_the_precision_over_repeats_widens_the_95_percent_interval_for_its_looks() -> None:
    ipm = Interval(1000, 980, 1020, 3)  # +-2 % at 95 %
    latency = Interval(20, 19.9, 20.1, 3)  # +-0.5 %
    one_look = repeat_spread(ipm, latency, looks=1)
    assert one_look.ipm == pytest.approx(0.02) and one_look.within(0.05)
    three = repeat_spread(ipm, latency, looks=3)  # repeats 3, 4, 5
    assert three.ipm == pytest.approx(0.02 * t_quantile(1 - 0.05 / 3, 2) / t_quantile(0.95, 2))
    assert not repeat_spread(ipm, None, looks=1).within(0.05)  # a figure without an interval is not known


def result(duration: float, stop: str | None, t: list[float]) -> LoadResult:
    n = len(t)
    requests = RequestLog(np.array(t), np.full(n, 1000), np.ones(n, bool), np.ones(n, np.int32))
    seconds = np.arange(int(duration), dtype=float)
    timeline = Timeline(seconds, np.ones(len(seconds)), np.ones(len(seconds)), np.zeros(len(seconds)))
    return LoadResult(requests, timeline, 100.0, duration, stop)


def test_level_runs_join_on_one_clock_and_only_a_limit_ends_the_plan() -> None:
    known = "precision reached: MaxInvocations +-1.0%, p95 +-0.5% over n=4 (...) within +-5%"
    latency = "latency: p95 above 500 ms in 3 consecutive windows (600.0, 700.0, 650.0 ms)"
    assert not ends_plan(known) and ends_plan(latency) and not ends_plan(None)
    joined = join_results([result(6.5, known, [0.5, 6.0]), result(4.0, latency, [1.0, 3.5])])
    assert joined.duration_s == 10.5 and joined.started_at == 100.0
    assert joined.requests.t_s.tolist() == [0.5, 6.0, 7.5, 10.0]
    assert joined.timeline.t_s.tolist() == [0, 1, 2, 3, 4, 5, 6.5, 7.5, 8.5, 9.5]
    assert joined.stop_reason == latency
    assert join_results([result(6.5, known, [0.5])]).stop_reason is None  # a level known early is not a stop


def spec_with(traffic: dict) -> dict:
    return {"name": "known", "traffic": traffic}


def test_the_spec_refuses_ramps_and_leaves_stored_keys_alone(tmp_path) -> None:
    path = tmp_path / "known.yaml"
    for traffic, words in (
        ({"stairs": {"users_per_step": 1, "number_of_steps": 2, "duration_seconds": 10}}, "stairs ramp"),
        ({"phases": [{"initial_users": 1, "spawn_rate": 6, "duration_seconds": 10}]}, "spawn_rate > 0 ramps"),
    ):
        path.write_text(yaml.safe_dump(spec_with(traffic | {"until_known": {}})))
        with pytest.raises(SpecError) as error:
            load_spec(path)
        said = " ".join([str(error.value), *error.value.problems])
        assert "known.yaml" in said and "until_known" in said and words in said
    levels = {"concurrency": {"users": [1, 2], "duration_seconds": 30}}
    off = ExperimentSpec.model_validate(spec_with(levels | {"until_known": False}))
    assert off.traffic.known is None and Rules.from_spec(off).stop.known_within is None
    assert "until_known" not in off.traffic.model_dump()  # fixed levels keep the key they were stored under
    known = ExperimentSpec.model_validate(spec_with(levels | {"until_known": True}))
    assert known.traffic.model_dump()["until_known"] == {"relative_half_width": 0.05, "min_windows": 4}
    assert Rules.from_spec(known).stop.known_within == 0.05


def test_until_known_is_on_by_default_where_levels_hold_their_load() -> None:
    def known(data: dict) -> float | None:
        spec = ExperimentSpec.model_validate({"name": "known"} | data)
        return spec.traffic.known.relative_half_width if spec.traffic.known else None

    concurrency = {"concurrency": {"users": [1, 2], "duration_seconds": 30}}
    assert known({"traffic": concurrency}) == 0.05
    assert known({"traffic": {"rate": {"requests_per_second": [5, 10], "duration_seconds": 30}}}) == 0.05
    assert known({"traffic": {}}) is None  # phases: SageMaker's fixed phases
    assert known({"traffic": {"stairs": {"users_per_step": 1, "number_of_steps": 2, "duration_seconds": 9}}}) is None
    assert known({"traffic": {}, "search": "adaptive"}) == 0.05
    ramp = {"phases": [{"initial_users": 1, "spawn_rate": 6, "duration_seconds": 10}]}
    assert known({"traffic": ramp, "search": "adaptive"}) is None  # a ramp cannot end when known
    assert known({"traffic": concurrency | {"until_known": {"relative_half_width": 0.1}}}) == 0.1


def test_from_top_is_off_by_default_and_keeps_stored_keys() -> None:
    levels = {"concurrency": {"users": [1, 4, 2], "duration_seconds": 30}}
    plain = ExperimentSpec.model_validate(spec_with(levels | {"until_known": True}))
    assert "from_top" not in plain.traffic.model_dump()["until_known"]  # off: the key stored before it existed
    assert Rules.from_spec(plain).stop.from_top is False
    top = ExperimentSpec.model_validate(spec_with(levels | {"until_known": {"from_top": True}}))
    assert top.traffic.model_dump()["until_known"]["from_top"] is True  # on: a protocol of its own
    rules = Rules.from_spec(top)
    assert rules.stop.from_top and Rules.from_json(rules.to_json()) == rules
    plan = compile_traffic(top.traffic)
    assert from_top_order(plan, rules) == [1, 2, 0]  # by load, the highest first (4, 2, 1 users)
    assert from_top_order(plan, Rules.from_spec(plain)) is None
    old = json.loads(rules.to_json())
    del old["stop"]["from_top"]  # rules written before the setting existed read back as off
    assert Rules.from_json(json.dumps(old)).stop.from_top is False


def test_level_runs_follow_the_order_given(tmp_path) -> None:
    spec = ExperimentSpec.model_validate(
        spec_with({"concurrency": {"users": [1, 2, 4], "duration_seconds": 30}, "until_known": {"from_top": True}})
    )
    plan, rules = compile_traffic(spec.traffic), Rules.from_spec(spec)
    runs = level_runs(plan, rules, tmp_path, [2, 1, 0])
    assert [(i, p.levels[0].load, f.name) for i, p, f in runs] == [
        (2, 4, "level-3"),
        (1, 2, "level-2"),
        (0, 1, "level-1"),
    ]
    assert [(i, p.levels[0].load) for i, p, _ in level_runs(plan, rules, tmp_path, [1])] == [(1, 2)]


def test_a_stricter_threshold_on_a_run_measured_from_the_top_says_what_was_not_measured() -> None:
    # the walk stopped at 4 users (p95 300 ms met 500 ms); the levels below were never measured
    records = [WindowRecord.of(0, w) for w in level([1200, 1210, 1190, 1205], [300, 310, 290, 305], phase=2)]
    records = [dataclasses.replace(r, load=4.0) for r in records]
    measured = Measured(repeats=1, requests=400, from_top_stop=4.0)
    met = decide(records, measured, Limits("p95", 500, 0.01))
    assert met.headline.max_invocations == pytest.approx(1201.25) and not any(
        "top down" in n for n in met.headline.notes
    )
    stricter = decide(records, measured, Limits("p95", 200, 0.01)).headline
    assert stricter.max_invocations is None
    assert any("at load 4 (the lowest measured)" in n for n in stricter.notes)
    [note] = [n for n in stricter.notes if "from the top down" in n]
    assert "stopped at load 4" in note and "levels below it were not measured" in note and "--fresh" in note
    assert Headline.from_dict(stricter.to_dict()).from_top_stop == 4.0
    walked_down = decide(records, Measured(repeats=1, requests=400), Limits("p95", 200, 0.01)).headline
    assert not any("from the top down" in n for n in walked_down.notes)  # no walk: nothing left unmeasured


class SaturatedServer:
    """A deployment whose load runs are synthesized (a fake at the load driver's boundary: no server here): it serves
    20 requests a second at one user and no more at any higher load."""

    endpoint, model_name, metrics_url, gpu_uuids, api_key_env = "http://127.0.0.1:9", "m", None, (), None
    load_url = endpoint
    wire = KSERVE

    def statistics(self) -> dict:
        return {}

    def server_pids(self) -> list[int]:
        return []


def test_flat_invocations_stops_across_level_runs_under_until_known(tmp_path, monkeypatch) -> None:
    """Under until_known each level is a load run of its own, so the child never saw the level before and flat did
    nothing: concurrency [1, 2, 4, 8] ran all four levels. Judged between level runs, the second (no faster than the
    first) ends the plan with the flat stop."""
    ran: list[float] = []
    monkeypatch.setattr("recommender.measurement.repeats.run_load", steady_load(ran))
    spec = ExperimentSpec.model_validate(
        spec_with(
            {"concurrency": {"users": [1, 2, 4, 8], "duration_seconds": 30}, "stopping": {"flat_invocations": True}}
        )
    )
    rules = Rules.from_spec(spec)
    assert rules.stop.known_within is not None and rules.stop.flat  # on by default for concurrency levels
    repeat = measure_once(SaturatedServer(), compile_traffic(spec.traffic), rules, [{}], tmp_path)
    assert ran == [1, 2]
    assert repeat.result.stop_reason is not None and repeat.result.stop_reason.startswith("flat invocations:")
    off = Rules(rules.limits, rules.windows, dataclasses.replace(rules.stop, flat=False))
    ran.clear()
    measure_once(SaturatedServer(), compile_traffic(spec.traffic), off, [{}], tmp_path / "off")
    assert ran == [1, 2, 4, 8]


def test_a_level_is_not_known_before_the_stability_rule_can_judge_it() -> None:
    """With `stability.windows: 6` a level stopped "precision reached ... n=4" and was then judged "too few windows
    (4 < 6)": the stability rule's windows bound the first look."""
    rules = Rules(RULES.limits, WindowRules(stable_windows=6), StopRules(known_within=0.05, known_min_windows=4))
    steady = level([1000, 1004, 998, 1002, 1001, 999, 1000], [20.0, 20.1, 19.9, 20.0, 20.05, 20.0, 20.0])
    assert [stop_reason(steady[:n], {0: 20}, rules) for n in (4, 5)] == [None, None]
    reason = stop_reason(steady[:6], {0: 20}, rules)
    assert reason is not None and reason.kind is StopKind.PRECISION and "n=6" in reason.text
    records = [WindowRecord.of(0, w) for w in steady[:6]]
    measured = Measured(windows=WindowCount(measured=6))
    assert decide(records, measured, rules.limits, rules.windows).headline.stable


def steady_load(ran: list[float], stop: str | None = None):
    """A run_load stand-in (the load driver's boundary): 20 requests a second at every level, ended by `stop`."""

    def run_load(request, progress=None) -> LoadResult:
        level = request.phases.levels[0]
        ran.append(level.load)
        sends = np.arange(0.02, level.duration_seconds - 0.01, 0.05)
        return result(level.duration_seconds, stop, sends.tolist())

    return run_load


def test_a_final_known_before_its_last_repeat_is_stored_complete(tmp_path, monkeypatch) -> None:
    """measure_level stops the repeats once known (here at the third of five): the headline keeps the cap, so the
    search counts it as measured in full (search/adaptive.py)."""
    ran: list[float] = []
    monkeypatch.setattr("recommender.measurement.repeats.run_load", steady_load(ran))
    spec = ExperimentSpec.model_validate(
        spec_with({"concurrency": {"users": [1, 2], "duration_seconds": 30}, "until_known": True})
    )
    h = measure_level(SaturatedServer(), spec, [{}], tmp_path, 2, repeats=5).headline
    assert (ran, h.repeats, h.most_repeats, h.complete(5)) == ([2, 2, 2], 3, 5, True)


def test_the_levels_that_ended_known_are_kept(tmp_path, monkeypatch) -> None:
    known = "precision reached: MaxInvocations +-1.0%, p95 +-0.5% over n=6 (...) within +-5%"
    monkeypatch.setattr("recommender.measurement.repeats.run_load", steady_load([], known))
    spec = ExperimentSpec.model_validate(spec_with({"concurrency": {"users": [1, 2], "duration_seconds": 30}}))
    rules = Rules.from_spec(spec)
    repeat = measure_once(SaturatedServer(), compile_traffic(spec.traffic), rules, [{}], tmp_path)
    assert repeat.known_levels == (0, 1) and repeat.result.stop_reason is None  # known early is not a stop
