"""Trace replay (files/trace.py, load/shapes.py) and gamma arrivals: parsing, the errors a user sees, the schedule."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from recommender.errors import SpecError
from recommender.files.trace import MAX_RATE, read_trace
from recommender.job.protocol import protocol_fingerprint
from recommender.load.shapes import TrafficPlan, arrival_schedule, compile_traffic
from recommender.metrics.rules import Rules
from recommender.spec import ExperimentSpec, TrafficSpec, load_spec

VERSIONS = {"locust": "x"}


def experiment(tmp_path: Path, trace_text: str, trace: str = "{file: trace.csv}", texts: int = 3) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    (tmp_path / "trace.csv").write_text(trace_text)
    sentences = ", ".join(f"sentence {k}" for k in range(texts))
    path = tmp_path / "e.yaml"
    path.write_text(f"name: t\npayload: {{texts: [{sentences}]}}\ntraffic:\n  trace: {trace}\n")
    return path


def refusal(path: Path) -> str:
    with pytest.raises(SpecError) as error:
        load_spec(path)
    assert len(error.value.problems) == 1
    return error.value.problems[0]


def test_a_trace_parses_with_comments_blanks_and_either_separator(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text(
        "# epoch seconds, payload index\n1700000000.5,2\n\n1700000000.75 0\n1700000001.5,2\n"
    )
    trace = read_trace(tmp_path / "t.txt")
    assert trace.times.tolist() == [0.0, 0.25, 1.0]
    assert trace.indices is not None and trace.indices.tolist() == [2, 0, 2]
    assert trace.lines.tolist() == [2, 4, 5]
    assert trace.replay_times(2.0).tolist() == [0.0, 0.125, 0.5]
    assert trace.duration(2.0) == pytest.approx(0.75)  # the span (0.5 s) and one mean gap (0.25 s)


def test_a_trace_compiles_to_one_open_loop_level_at_its_mean_rate(tmp_path: Path) -> None:
    spec = load_spec(experiment(tmp_path, "0\n0.1\n0.1\n0.4\n", "{file: trace.csv, speedup: 2, max_concurrency: 5}"))
    plan = compile_traffic(spec.traffic)
    assert plan.open_loop and plan.arrival == "trace" and len(plan.levels) == 1
    level = plan.levels[0]
    assert (level.initial_users, level.duration_seconds) == (5, pytest.approx(0.2 + 0.2 / 3))
    assert level.rate == pytest.approx(4 / level.duration_seconds)
    times, indices = plan.sends()
    assert times.tolist() == [0.0, 0.05, 0.05, 0.2] and indices is None
    assert TrafficPlan.from_json(plan.to_json()) == plan  # what the load child gets
    one = plan.with_levels(plan.levels)  # a level run on its own keeps the replay
    assert one.sends()[0].tolist() == times.tolist()


def test_the_trace_path_is_read_from_the_experiment_files_folder(tmp_path: Path) -> None:
    spec = load_spec(experiment(tmp_path, "0,1\n1,2\n"))
    assert spec.traffic.trace is not None and spec.traffic.trace.file == (tmp_path / "trace.csv").resolve()
    assert compile_traffic(spec.traffic).sends()[1].tolist() == [1, 2]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0\n2\n1\n", "line 3: timestamp 1 is before the previous request's (2)"),
        ("0\nsoon\n", "line 2: timestamp 'soon' is not a number of seconds"),
        ("0\nnan\n", "line 2: timestamp 'nan' is not a number of seconds"),
        ("0,1\n1,3\n", "line 2: payload index 3 is not one of the payload's 3 requests (0 to 2)"),
        ("0,1\n1,-1\n", "line 2: payload index '-1' is not a whole number >= 0"),
        ("0,1\n1\n", "line 2: a payload index on some lines and not on others"),
        ("0\n1,1\n", "line 2: a payload index on some lines and not on others"),
        ("0,1,2\n", "line 1: 3 fields, at most 2"),
        ("# only a comment\n5\n", "holds 1 request timestamp(s); a trace needs at least 2"),
        ("", "holds 0 request timestamp(s)"),
        ("3\n3\n", "line 2: every timestamp is 3; a trace needs time between"),
        ("0\n8000\n", "line 2: the replay lasts 16,000 s at speedup 1, over the 7,200 s"),
    ],
)
def test_a_trace_that_cannot_be_replayed_names_the_file_and_the_line(tmp_path: Path, text: str, expected: str) -> None:
    problem = refusal(experiment(tmp_path, text))
    assert problem.startswith(f"{tmp_path / 'e.yaml'}: traffic.trace.file: {(tmp_path / 'trace.csv').resolve()}: ")
    assert expected in problem


def test_a_rate_beyond_the_generators_ceiling_names_the_busiest_second(tmp_path: Path) -> None:
    lines = "".join(f"{k * 9e-6:.6f}\n" for k in range(150_000))  # 111,112 sends in every second of replay
    problem = refusal(experiment(tmp_path, "# a burst\n" + lines, "{file: trace.csv, speedup: 1}"))
    assert "line 2: 111,112 sends in the second of replay starting here (speedup 1)" in problem
    assert f"beyond the generator's ceiling of {MAX_RATE:,.0f} requests/s" in problem
    load_spec(experiment(tmp_path, "# a burst\n" + lines, "{file: trace.csv, speedup: 0.5}"))  # half: within


def test_a_missing_or_binary_trace_is_refused_by_the_hardened_loader(tmp_path: Path) -> None:
    path = experiment(tmp_path, "0\n1\n")
    (tmp_path / "trace.csv").unlink()
    assert "no such trace file" in refusal(path)
    (tmp_path / "trace.csv").write_bytes(b"0\n\x001\n")
    assert "is binary (it holds NUL bytes), not a trace file" in refusal(path)


def test_validate_exits_2_with_the_line_and_no_traceback(tmp_path: Path) -> None:
    path = experiment(tmp_path, "0\n2\n1\n")
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "500"},
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "trace.csv: line 3: timestamp 1 is before the previous request's (2)" in done.stderr
    assert "hint: Sort the file by its first column" in done.stderr


def test_trace_settings_are_checked_with_the_spec() -> None:
    with pytest.raises(ValueError, match="give only one traffic shape, not rate and trace"):
        TrafficSpec(rate={"requests_per_second": 1, "duration_seconds": 1}, trace={"file": "t"})
    with pytest.raises(ValueError, match="set remote_workers to 0"):
        TrafficSpec(trace={"file": "t"}, remote_workers=1)
    with pytest.raises(ValueError, match="speedup"):
        TrafficSpec(trace={"file": "t", "speedup": 0})


def test_a_trace_is_judged_late_as_the_rate_shape_is(tmp_path: Path) -> None:
    spec = load_spec(experiment(tmp_path, "0\n1\n", "{file: trace.csv, late_ms: 3, max_late_share: 0.2}"))
    windows = Rules.from_spec(spec).windows
    assert (windows.late_ms, windows.max_late_share) == (3, 0.2)


def test_the_reuse_key_follows_the_traces_content_not_its_path(tmp_path: Path) -> None:
    first = protocol_fingerprint(load_spec(experiment(tmp_path / "a", "0\n1\n")), VERSIONS)
    moved = protocol_fingerprint(load_spec(experiment(tmp_path / "b", "0\n1\n")), VERSIONS)
    edited = protocol_fingerprint(load_spec(experiment(tmp_path / "a", "0\n1.5\n")), VERSIONS)
    assert first == moved and edited != first


# --- gamma arrivals ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("cv", [0.5, 1.0, 2.0, 4.0])
def test_gamma_gaps_have_the_stated_rate_and_coefficient_of_variation(cv: float) -> None:
    times = arrival_schedule([(0, 2000, 10)], "gamma", seed=11, cv=cv)
    gaps = np.diff(times)
    assert gaps.std() / gaps.mean() == pytest.approx(cv, rel=0.08)
    assert len(times) / 2000 == pytest.approx(10, rel=0.1)
    assert np.all(gaps >= 0) and times[-1] < 2000


def test_gamma_schedule_is_seeded_and_fills_each_level_even_when_bursty() -> None:
    levels = [(0, 5, 4), (5, 10, 40)]
    first = arrival_schedule(levels, "gamma", seed=3, cv=10)  # very bursty: the first block can fall short
    assert np.array_equal(first, arrival_schedule(levels, "gamma", seed=3, cv=10))
    assert not np.array_equal(first, arrival_schedule(levels, "gamma", seed=4, cv=10))
    assert np.all(np.diff(first) >= 0) and first[-1] < 10


def test_gamma_needs_its_cv_and_only_gamma_takes_one() -> None:
    with pytest.raises(ValueError, match="arrival gamma needs `cv`"):
        TrafficSpec(rate={"requests_per_second": 5, "duration_seconds": 5, "arrival": "gamma"})
    with pytest.raises(ValueError, match="cv applies to arrival gamma only"):
        TrafficSpec(rate={"requests_per_second": 5, "duration_seconds": 5, "arrival": "poisson", "cv": 2})
    rate = {"requests_per_second": 5, "duration_seconds": 5, "arrival": "gamma", "cv": 2, "seed": 9}
    plan = compile_traffic(TrafficSpec(rate=rate))
    assert plan.cv == 2 and TrafficPlan.from_json(plan.to_json()) == plan
    assert plan.schedule().tolist() == arrival_schedule([(0, 5, 5)], "gamma", seed=9, cv=2).tolist()


def test_specs_without_the_new_fields_keep_their_reuse_key() -> None:
    """No cv and no trace leave the traffic dump as before gamma and traces existed (stored keys stay valid)."""
    spec = ExperimentSpec.model_validate(
        {"name": "t", "traffic": {"rate": {"requests_per_second": 5, "duration_seconds": 5}}}
    )
    dump = spec.traffic.model_dump(mode="json")
    assert "trace" not in dump and "cv" not in dump["rate"]


def test_every_trace_and_open_loop_field_is_described() -> None:
    from recommender.spec import Rate, Trace

    for model in (Trace, Rate):
        assert all(field.description for field in model.model_fields.values()), model.__name__
    assert {"max_concurrency", "late_ms", "max_late_share"} <= set(Trace.model_fields)  # the rate shape's accounting
