"""What the server and the client did about batching during one tool's run (issue 37 item 9: fidelity under dynamic
batching), for the fidelity benchmark.

    ServerCounts.read(deployment)            # Triton's cumulative counts: inferences, executions, compute_infer ns
    ServerCounts.delta(before, after)        # over one run: mean compute per inference, mean batch per execution
    resend_gaps_us(sent_s, done_s, users)    # closed loop: from each answer to the next send, as matched in time

Average batch size = inferences / executions over the run (Triton's model statistics: an execution runs one batch).
A closed-loop client of N users re-sends after each answer; the gap from an answer to that re-send is what lets the
requests of different users meet inside the dynamic batcher's queue delay. Neither log says which user sent a
request, so answers and sends are matched in time order: after the first N sends (one per user), the k-th send
follows the k-th answer (a user sends again only after its answer, and a send gap is far shorter than the time
between answers). The same rule is applied to both tools' logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class ServerCounts:
    inferences: int
    executions: int
    compute_ns: int
    compute_count: int

    @classmethod
    def read(cls, deployment: Any) -> ServerCounts:
        stats = deployment.statistics()["model_stats"][0]
        compute = stats["inference_stats"]["compute_infer"]
        return cls(
            int(stats["inference_count"]), int(stats["execution_count"]), int(compute["ns"]), int(compute["count"])
        )

    @staticmethod
    def delta(before: ServerCounts, after: ServerCounts) -> tuple[float, float]:
        """(mean compute_infer ms per inference, mean batch per execution) between two readings; nan without any."""
        count = after.compute_count - before.compute_count
        compute_ms = (after.compute_ns - before.compute_ns) / count / 1e6 if count else float("nan")
        executions = after.executions - before.executions
        batch = (after.inferences - before.inferences) / executions if executions else float("nan")
        return compute_ms, batch


def resend_gaps_us(sent_s: np.ndarray, done_s: np.ndarray, users: int) -> np.ndarray:
    """Closed loop: microseconds from each answer to the send it released (see the module's note); empty when the
    log has no more sends than users."""
    sends, answers = np.sort(sent_s), np.sort(done_s)
    follow = sends[users:]
    count = min(len(follow), len(answers))
    return (follow[:count] - answers[:count]) * 1e6


def gap_summary(gaps_us: np.ndarray) -> tuple[float, float]:
    """(median, p95) of the re-send gaps in microseconds; nan when there are none."""
    if gaps_us.size == 0:
        return float("nan"), float("nan")
    p50, p95 = np.percentile(gaps_us, [50, 95])
    return float(p50), float(p95)
