"""Every traffic shape measured end to end on a tiny model: real tritonserver, real Locust child, real sampling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.candidates import Candidate
from recommender.load.result import LoadResult
from recommender.measurement import repeats as repeats_module
from recommender.measurement.repeats import measure
from recommender.modelrepo.repository import write_model_repository
from recommender.spec import ExperimentSpec
from recommender.targets.local import LocalTarget

pytestmark = pytest.mark.integration

BODIES = [
    {
        "inputs": [
            {"name": "input_ids", "shape": [1, 5], "datatype": "INT64", "data": [3, 7, 11, 2, 9]},
            {"name": "attention_mask", "shape": [1, 5], "datatype": "INT64", "data": [1, 1, 1, 1, 1]},
        ]
    }
]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, artifacts):
    root = tmp_path_factory.mktemp("shapes")
    repository = write_model_repository(Candidate("onnx", None, 1, 4, "local"), artifacts["onnx"], root / "repo")
    with LocalTarget(ready_timeout=120).deploy(repository, "model", root / "run") as deployed:
        yield deployed


def spec_with(traffic: dict) -> ExperimentSpec:
    base = {"warmup_seconds": 1, "window_seconds": 1.5}
    return ExperimentSpec.model_validate(
        {"name": "shapes", "traffic": base | traffic, "latency_threshold": {"percentile": "p90", "ms": 2000}}
    )


def test_stairs_measure_windows_per_step_with_server_figures(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment,
        spec_with({"stairs": {"users_per_step": 1, "number_of_steps": 2, "duration_seconds": 4}}),
        BODIES,
        tmp_path,
    )
    windows = [w for _, w in m.windows]
    assert [(w.phase_index, w.stats.start_s, w.stats.end_s, w.load) for w in windows] == [
        (0, 1.0, 2.5, 1),
        (0, 2.5, 4.0, 1),
        (1, 5.0, 6.5, 2),
        (1, 6.5, 8.0, 2),
    ]
    assert all(w.stats.ok > 0 and w.generator_cpu is not None for w in windows)
    assert all(w.server["server_cpu_percent"] is not None and w.server["server_rss_mb"] > 0 for w in windows)
    assert any(w.server.get("queue_us") is not None for w in windows)
    h = m.headline
    assert h.max_invocations > 0 and h.within_threshold and h.stop_reason is None
    top = [w.ipm for w in windows if w.phase_index == 1]  # the highest level within 2 s: its mean, not its best window
    assert h.phase_index == 1 and h.max_invocations == pytest.approx(sum(top) / len(top))
    assert h.windows.measured == 4 and h.windows.at_level == 2 and h.repeats == 1
    prometheus = m.server_stats["prometheus"]
    assert prometheus["available"] and prometheus["nv_inference_request_success"] >= sum(w.stats.ok for w in windows)
    assert isinstance(m.server_stats["gpu"], str)  # "no GPU (...)" here: recorded, not fatal
    print(h, m.server_stats["at_max_invocations"], sep="\n")


def test_concurrency_stops_early_on_max_invocations(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment,
        spec_with({"concurrency": {"users": [1, 2], "duration_seconds": 6}, "stopping": {"max_invocations": 1}}),
        BODIES,
        tmp_path,
    )
    assert m.headline.stop_reason.startswith("max invocations: a window reached")
    assert [w.phase_index for _, w in m.windows] == [0]  # stopped after the first window
    assert len(m.phases) == 1


def test_open_loop_rate_keeps_its_schedule(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment,
        spec_with(
            {
                "rate": {"requests_per_second": [10, 20], "duration_seconds": 4, "max_concurrency": 8},
                "until_known": False,  # one load run over both levels: its schedule is what this checks
            }
        ),
        BODIES,
        tmp_path,
    )
    windows = [w for _, w in m.windows]
    assert [w.load for w in windows] == [10, 10, 20, 20]
    sends = LoadResult.from_npz(tmp_path / "load.npz").requests.t_s  # send times are the schedule's (open loop)
    for (
        w
    ) in windows:  # a window holds the sends scheduled in it, give or take one at each edge, however slow the server
        sent = int(((sends >= w.stats.start_s) & (sends < w.stats.end_s)).sum())
        assert abs(sent - w.load * (w.stats.end_s - w.stats.start_s)) <= 2, (w.load, sent)
        assert w.late_share is not None and 0 <= w.late_share <= 1
    assert all(w.stats.latency_ms["p50"] > 0 for w in windows)


def test_a_trace_is_replayed_at_its_times_with_its_payload_indices(deployment, tmp_path: Path) -> None:
    """A short irregular trace, replayed twice as fast: every request is scheduled at its line's time (latency timed
    from there), goes out at it within the late-send accounting, and carries the body its payload index names (index
    1 is a body the server refuses: exactly those requests fail)."""
    rng = np.random.default_rng(5)
    gaps = 0.002 + rng.gamma(0.25, 0.312, size=60)  # bursty gaps, mean 80 ms: 60 requests in ~4.8 s
    stamps = np.round(1_700_000_000 + np.cumsum(gaps), 6)
    indices = (np.arange(60) % 3 == 2).astype(int)
    trace = tmp_path / "trace.csv"
    trace.write_text("".join(f"{t:.6f},{k}\n" for t, k in zip(stamps, indices, strict=True)))
    refused = {"inputs": [{"name": "no_such_input", "shape": [1, 1], "datatype": "INT64", "data": [1]}]}
    spec = spec_with(
        {
            "trace": {"file": str(trace), "speedup": 2, "max_concurrency": 8, "late_ms": 5},
            "stopping": {"error_rate": False},  # a third of the requests fail on purpose
        }
    )
    m = measure(deployment, spec, [BODIES[0], refused], tmp_path)
    log = LoadResult.from_npz(tmp_path / "load.npz").requests
    order = np.argsort(log.t_s, kind="stable")
    replay = (stamps - stamps[0]) / 2
    assert log.t_s[order] == pytest.approx(replay, abs=1e-6)  # scheduled at the trace's times, every one sent
    assert log.late_us is not None and log.late_us.min() >= 0
    assert np.median(log.late_us) < 5000  # most went out within late_ms of their time (a busy host: not all)
    # which request failed follows its payload index: index 0 is answered, index 1 refused
    assert np.array_equal(log.ok[order], indices == 0)
    windows = [w for _, w in m.windows]
    assert windows and all(w.late_share is not None for w in windows)
    done = log.t_s + log.latency_us / 1e6
    for w in windows:  # the window's late share: of the requests completed in it, those sent later than late_ms
        inside = (done >= w.stats.start_s) & (done < w.stats.end_s)
        assert w.late_share == pytest.approx(np.mean(log.late_us[inside] > 5000) if inside.any() else 0.0)
    assert windows[0].load == pytest.approx(60 / (replay[-1] + replay[-1] / 59))  # the trace's mean rate


def test_repeats_give_an_interval(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment, spec_with({"concurrency": {"users": [1], "duration_seconds": 4}, "repeats": 2}), BODIES, tmp_path
    )
    interval = m.headline.ipm_interval
    # 2 repeats of 2 windows: window-to-window noise only (an interval over repeats needs 3)
    assert m.headline.repeats == 2 and (interval.n, interval.counts) == (4, "windows")
    assert interval.low <= interval.mean <= interval.high
    assert {repeat for repeat, _ in m.windows} == {0, 1}
    assert (tmp_path / "repeat-1" / "load.npz").exists() and (tmp_path / "repeat-2" / "load.npz").exists()


def test_until_known_ends_each_level_and_the_repeats_once_known(
    deployment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 30 half-second windows at most: the interval takes its effective n from the windows' autocorrelation, which a
    # handful of windows cannot rule out (README "Definitions"), so a level is known after more windows than 4
    planned_s, most = 15.0, 4
    decisions: list[tuple[int, bool]] = []  # the repeats' rule, asked after each repeat: (repeats so far, known)

    rule = repeats_module.known_over_repeats

    def spy(so_far, rules, limit):
        known = rule(so_far, rules, limit)
        decisions.append((len(so_far), known))
        return known

    monkeypatch.setattr(repeats_module, "known_over_repeats", spy)
    m = repeats_module.measure(
        deployment,
        spec_with(
            {
                "concurrency": {"users": [1, 2], "duration_seconds": planned_s},
                "window_seconds": 0.5,
                "repeats": most,
                "until_known": {"relative_half_width": 1.0, "min_windows": 4},
            }
        ),
        BODIES,
        tmp_path,
    )
    level_runs = sorted(tmp_path.glob("repeat-*/level-*/*.npz"))
    results = [LoadResult.from_npz(path) for path in level_runs]
    print(
        decisions,
        [
            (path.parent.parent.name, path.parent.name, r.duration_s, r.stop_reason)
            for path, r in zip(level_runs, results, strict=True)
        ],
    )
    # the repeats end at the first count the rule calls known (never before the third: MIN_REPEATS), at `most`
    # otherwise; how many that is depends on this host's noise, the rule's being obeyed does not
    ran = m.headline.repeats
    assert [count for count, _ in decisions] == list(range(1, ran + 1))
    assert [known for _, known in decisions[:-1]] == [False] * (ran - 1)
    assert decisions[-1][1] or ran == most
    assert not any(known for count, known in decisions if count < 3)
    assert not (tmp_path / f"repeat-{ran + 1}").exists()
    assert len(results) == 2 * ran  # each repeat's 2 levels, each a load run of its own
    # each level ends once known, or runs its planned duration and is flagged (on a contended host some levels'
    # windows are too noisy even for +-100 %)
    known = [(path.parent.name, r) for path, r in zip(level_runs, results, strict=True) if r.stop_reason]
    assert known and all(r.stop_reason.startswith("precision reached: ") for _, r in known)
    # ended at least a window before its planned end (the check comes at each window's close, the traffic ends at the
    # shape's next tick, once a second; full runs end at ~15.03 s). A level known in its last second ran to its end and
    # records no stop (stopping.ended_early): 2026-12-07's CI stored one at 15.04 s as ended early, before that rule
    assert all(r.duration_s < planned_s - 0.5 / 2 for _, r in known)
    assert m.headline.stop_reason is None
    # a level that ran its whole duration is flagged unless its figures were known in its last second (the plan's
    # end ends the level anyway, so no stop is recorded: seen in 2026-12-07's full runs); a flag never comes without
    # such a level
    flagged = [flag for flag in m.headline.flags if flag.startswith("precision not reached (")]
    assert not flagged or len(known) < len(results), flagged
    assert set(m.headline.known_levels) == {int(name.removeprefix("level-")) - 1 for name, _ in known}
    per_repeat_levels = {(number, w.phase_index) for number, w in m.windows}
    assert per_repeat_levels == {(r, p) for r in range(ran) for p in range(2)}
    assert m.headline.phase_index == 1 and m.headline.max_invocations > 0


def test_a_level_not_known_by_its_planned_end_is_flagged(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment,
        spec_with(
            {
                "concurrency": {"users": [1], "duration_seconds": 6},
                "window_seconds": 1,
                "until_known": {"relative_half_width": 0.0001, "min_windows": 3},
            }
        ),
        BODIES,
        tmp_path,
    )
    assert m.headline.stop_reason is None
    assert [w.index for _, w in m.windows] == [0, 1, 2, 3, 4]  # every planned window ran
    [flag] = [f for f in m.headline.flags if f.startswith("precision not reached")]
    assert "asked +-0%" in flag


def test_from_top_measures_only_the_top_level_when_it_meets(deployment, tmp_path: Path) -> None:
    m = measure(
        deployment,
        spec_with(
            {
                "concurrency": {"users": [1, 2, 4], "duration_seconds": 5},
                "window_seconds": 1,
                "repeats": 3,
                "until_known": {"relative_half_width": 1.0, "min_windows": 3, "from_top": True},
            }
        ),
        BODIES,
        tmp_path,
    )
    ran = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.glob("repeat-*/level-*/load.npz"))
    assert ran == ["repeat-1/level-3", "repeat-2/level-3", "repeat-3/level-3"]  # 4 users met: nothing below ran
    assert {w.phase_index for _, w in m.windows} == {2} and {r for r, _ in m.windows} == {0, 1, 2}
    h = m.headline
    assert h.level_load == 4 and h.max_invocations > 0 and h.repeats == 3 and h.ipm_interval.counts == "repeats"
    assert h.from_top_stop == 4


def test_from_top_walks_down_past_a_breach(deployment, tmp_path: Path) -> None:
    # 128 users on the 2-core host queue for tens of ms; 1 user waits ~1 ms: a 10 ms threshold splits them (64 users
    # met it once in a full run on a quiet host, where the walk then never went down)
    spec = spec_with(
        {
            "concurrency": {"users": [1, 128], "duration_seconds": 5},
            "window_seconds": 1,
            "repeats": 3,
            "until_known": {"relative_half_width": 1.0, "min_windows": 3, "from_top": True},
        }
    )
    spec = spec.model_copy(update={"latency_threshold": spec.latency_threshold.model_copy(update={"ms": 10})})
    m = measure(deployment, spec, BODIES, tmp_path)
    ran = sorted(str(p.parent.relative_to(tmp_path)) for p in tmp_path.glob("repeat-*/level-*/load.npz"))
    assert ran == ["repeat-1/level-1", "repeat-1/level-2", "repeat-2/level-1", "repeat-3/level-1"]
    h = m.headline
    assert h.level_load == 1 and h.max_invocations > 0 and h.repeats == 3
    assert h.from_top_stop is None  # the walk reached the lowest level: nothing left unmeasured
