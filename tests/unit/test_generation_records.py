"""The request log's generation columns: all or none, rows selected with their chunk slices, parts joined."""

from __future__ import annotations

import numpy as np
import pytest

from recommender.metrics.records import RequestLog, joined


def _log(n_chunks: list[int], t0: float = 0.0) -> RequestLog:
    n = len(n_chunks)
    starts = np.concatenate([[0], np.cumsum(n_chunks)[:-1]]).astype(np.int64)
    chunks = np.concatenate([np.arange(1, k + 1) * 1000 + 100 * i for i, k in enumerate(n_chunks)] or [[]])
    return RequestLog(
        t_s=t0 + np.arange(n, dtype=float),
        latency_us=np.array([k * 1000 + 500 for k in n_chunks]),
        ok=np.ones(n, bool),
        users=np.ones(n, np.int32),
        ttft_us=np.array([1000 + 100 * i if k else -1 for i, k in enumerate(n_chunks)]),
        input_tokens=np.full(n, 16),
        output_tokens=np.array(n_chunks),
        tokens_counted=np.zeros(n, bool),
        finished=np.ones(n, bool),
        chunk_start=starts,
        chunk_count=np.array(n_chunks),
        chunk_us=chunks,
    )


def test_generation_columns_come_together() -> None:
    with pytest.raises(ValueError, match="come together"):
        RequestLog(np.zeros(1), np.zeros(1), np.ones(1, bool), np.ones(1), ttft_us=np.zeros(1))


def test_selected_rows_keep_their_chunk_times() -> None:
    log = _log([3, 0, 2])
    part = log.rows(np.array([False, True, True]))
    assert part.generative and len(part) == 2
    assert part.chunk_times_us(0).tolist() == []
    assert part.chunk_times_us(1).tolist() == [1200, 2200]


def test_joined_parts_shift_chunk_starts(tmp_path) -> None:
    whole = joined([(0.0, _log([2, 1])), (10.0, _log([1, 3]))])
    assert whole.t_s.tolist() == [0.0, 1.0, 10.0, 11.0]
    assert [whole.chunk_times_us(i).tolist() for i in range(4)] == [[1000, 2000], [1100], [1000], [1100, 2100, 3100]]
    whole.to_npz(tmp_path / "r.npz")
    back = RequestLog.from_npz(tmp_path / "r.npz")
    assert back.chunk_times_us(3).tolist() == [1100, 2100, 3100] and back.output_tokens.tolist() == [2, 1, 1, 3]


def test_a_part_without_generation_drops_it_from_the_join() -> None:
    plain = RequestLog(np.zeros(1), np.zeros(1), np.ones(1, bool), np.ones(1))
    assert not joined([(0.0, _log([1])), (5.0, plain)]).generative
