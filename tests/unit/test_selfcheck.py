"""The generator's self-check flags (metrics/selfcheck.py) and the pure rules of generators.py."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.load.generators import auto_workers, generator_cpus
from recommender.metrics.records import RequestLog, Timeline
from recommender.metrics.selfcheck import SATURATED_CPU, level_flags, saturated, server_slowed, stream_lagged
from recommender.metrics.steady import Window
from recommender.metrics.summary import WindowStats
from recommender.targets.lifeline import exit_reason


def window(index: int, start: float, compute_us: float | None = None) -> Window:
    stats = WindowStats(start, start + 5, 100, 100, 0, 1200.0, {"p95": 10.0})
    return Window(0, index, stats, 4, server={} if compute_us is None else {"compute_infer_us": compute_us})


def timeline(busiest: list[float], total: list[float] | None = None) -> Timeline:
    seconds = np.arange(len(busiest)) + 0.5
    return Timeline(
        seconds,
        np.full(len(busiest), 4),
        np.full(len(busiest), 4),
        np.array(total or busiest),
        cpu_max_percent=np.array(busiest),
    )


@pytest.mark.parametrize(
    ("busiest", "flagged"),
    [([50.0] * 10, False), ([50.0] * 5 + [95.0] * 5, True), ([89.0] * 10, False), ([SATURATED_CPU] * 10, True)],
)
def test_saturation_is_judged_on_the_busiest_process_per_window(busiest: list[float], flagged: bool) -> None:
    windows = [window(0, 0.0), window(1, 5.0)]
    assert (saturated(windows, timeline(busiest, total=[b * 3 for b in busiest])) is not None) is flagged


def test_one_process_timeline_uses_its_own_cpu() -> None:
    single = Timeline(np.array([0.5, 1.5]), np.array([1, 1]), np.array([1, 1]), np.array([97.0, 99.0]))
    assert "98 %" in saturated([window(0, 0.0)], single)


@pytest.mark.parametrize(
    ("compute", "flagged"),
    [([100, 102, 110, 114], False), ([100, 100, 100, 130], True), ([100, 100], False), ([None, 100, 200], False)],
)
def test_server_slowdown_against_the_first_windows(compute: list[float | None], flagged: bool) -> None:
    windows = [window(i, 5.0 * i, c) for i, c in enumerate(compute)]
    result = server_slowed(windows)
    assert (result is not None) is flagged
    if flagged:
        assert "+30%" in result


def test_a_worker_lost_inside_the_level_flags_it_and_only_it() -> None:
    lost = [{"t_s": 12.5, "worker": "w", "index": 1, "reason": "worker 2 (pid 9) killed by SIGKILL"}]
    assert level_flags([window(0, 0.0)], (10.0, 20.0), None, lost) == [
        "worker dropped at 12.5 s (worker 2 (pid 9) killed by SIGKILL)"
    ]
    assert level_flags([window(0, 0.0)], (0.0, 10.0), None, lost) == []


@pytest.mark.parametrize(
    ("previous", "cores", "expected"),
    [(None, 2, 1), (None, 8, 7), (50.0, 8, 1), (61.0, 8, 2), (500.0, 4, 3), (0.0, 1, 1)],
)
def test_auto_workers_rule(previous: float | None, cores: int, expected: int) -> None:
    assert auto_workers(previous, cores) == expected


@pytest.mark.parametrize(
    ("setting", "available", "expected"),
    [(None, [0, 1], None), (None, [0, 1, 2, 3], (3,)), (None, list(range(8)), (6, 7)), ([0], [0, 1], (0,))],
)
def test_generator_cpus_default_isolates_only_on_four_or_more(setting, available, expected) -> None:
    assert generator_cpus(setting, available) == expected


def test_exit_reason_names_the_signal() -> None:
    assert exit_reason(-9) == "killed by SIGKILL" and exit_reason(3) == "exited with code 3"


def streamed(rows: int, tokens: int, gap_us: int) -> RequestLog:
    """`rows` generations over 10 s, each `tokens` chunks `gap_us` apart."""
    return RequestLog(
        t_s=np.linspace(0, 9.9, rows),
        latency_us=np.full(rows, tokens * gap_us),
        ok=np.ones(rows, bool),
        users=np.full(rows, 8),
        ttft_us=np.full(rows, gap_us),
        input_tokens=np.full(rows, 4),
        output_tokens=np.full(rows, tokens),
        tokens_counted=np.zeros(rows, bool),
        finished=np.ones(rows, bool),
        chunk_start=np.arange(rows) * tokens,
        chunk_count=np.full(rows, tokens),
        chunk_us=np.tile(np.arange(1, tokens + 1) * gap_us, rows),
    )


@pytest.mark.parametrize(
    ("cpu", "rows", "gap_us", "says"),
    [
        (30.0, 100, 1000, None),  # 80 tokens/s at 0.3 core: costly per token, but the reader has room
        (60.0, 1000, 1000, "core per 1,000 output tokens/s > 0.1"),  # 800 tokens/s at 0.6 core: 0.75
        (60.0, 10_000, 1000, None),  # 8,000 tokens/s at 0.6 core: 0.075, under the bound
        (60.0, 10_000, 20, "of chunk gaps under 100 us"),  # cheap per token, but chunks read back to back
    ],
)
def test_a_generative_level_is_flagged_when_its_busy_reader_falls_behind(
    cpu: float, rows: int, gap_us: int, says: str | None
) -> None:
    flags = level_flags([window(0, 0.0)], (0.0, 10.0), timeline([cpu] * 10), [], streamed(rows, 8, gap_us))
    assert [f for f in flags if f.startswith("generator behind")] == [] if says is None else says in "".join(flags)


def test_a_run_that_is_not_generative_has_no_stream_flag() -> None:
    log = RequestLog(np.zeros(3), np.full(3, 10), np.ones(3, bool), np.ones(3))
    assert stream_lagged(log, (0.0, 10.0), timeline([99.0] * 10)) is None


def test_an_illegal_instruction_is_said_for_what_it_usually_is() -> None:
    assert exit_reason(-4).startswith("killed by SIGILL (an illegal instruction: this CPU advertises")
    assert exit_reason(-200) == "killed by signal 200"
