"""Which candidates may run together, and the pool that runs them (the experiment's `max_parallel`).

    slot_group(target, index)             -> which targets share hardware (all local/docker targets: this host)
    slots_for(kind, gpus, max_parallel)   -> the slots a target offers (a slot: the GPUs a candidate is pinned to)
    group_slots(targets, max_parallel)    -> the slots of each group, its targets' merged
    run_all(items, work, max_parallel, stop)  -> every work item run, at most max_parallel at once

What may overlap (docs/design.md "Targets"): SageMaker endpoints are separate machines, so one target offers
`max_parallel` slots; a remote target is ONE existing endpoint, so one slot (two remote hosts run side by side); a
local or docker target with GPUs offers one slot per GPU (each candidate pinned to its GPU); a local or docker target
on the CPU offers one slot: two servers on the same cores would measure each other (and the load generator), so local
CPU candidates always run one after another. Local and docker targets all run on this host, so they share one
group of slots whatever their labels: one slot per GPU where they all serve on the same GPUs, else one slot (a target
on the CPU, or targets on different GPUs, keep the host to one candidate at a time).

Interruption: Ctrl-C / SIGTERM reaches the main thread only. `run_all` then sets `stop`, starts nothing more and
waits for the running items, which see `stop` (stopped_error) at their next check, leave their deployments (torn
down on the way out) and record themselves interrupted; the interruption is raised again once they are all done.
"""

from __future__ import annotations

import queue
import signal
import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from recommender.errors import Interrupted

Slot = tuple[int, ...] | None  # the GPU indices a candidate is pinned to; None: no pinning (CPU, or a cloud machine)
_POLL_S = 0.2


@dataclass
class Stop:
    """Set once by the main thread when the job is interrupted; workers raise `error()` at their next check."""

    event: threading.Event = field(default_factory=threading.Event)
    signum: int = signal.SIGINT

    def set(self, interrupt: BaseException) -> None:
        self.signum = getattr(interrupt, "signum", signal.SIGINT)
        self.event.set()

    def check(self) -> None:
        """Raise an interruption in this (worker) thread once the job was told to stop."""
        if self.event.is_set():
            raise Interrupted(self.signum)

    def __bool__(self) -> bool:
        return self.event.is_set()


def slot_group(target: Any, index: int) -> str:
    """The hardware a target's candidates run on: this host for local, docker, infinity, vllm and llamacpp, the
    endpoint for remote, the target's own endpoints for sagemaker. Targets in one group share its slots."""
    if target.kind in ("local", "docker", "infinity", "vllm", "llamacpp"):
        return "this host"
    if target.kind == "remote":
        return f"remote {target.endpoint}"
    return f"target {index}"


def slots_for(kind: str, gpus: Sequence[int], max_parallel: int) -> list[Slot]:
    """The slots a target offers (see the module text): at most max_parallel, one per GPU where it has GPUs."""
    if kind == "sagemaker":
        return [None] * max_parallel
    if kind == "remote":
        return [None]
    if gpus and max_parallel > 1:
        slots: list[Slot] = [(index,) for index in gpus]
        return slots[:max_parallel]
    return [None]


def group_slots(
    targets: Sequence[tuple[Hashable, str, tuple[int, ...]]], max_parallel: int
) -> dict[Hashable, list[Slot]]:
    """The slots of each group from its targets' (group, kind, GPU indices): the one target's slots, or the targets'
    common slots where they all serve on the same GPUs, else one slot (see the module text)."""
    members: dict[Hashable, list[tuple[str, tuple[int, ...]]]] = {}
    for group, kind, gpus in targets:
        members.setdefault(group, []).append((kind, tuple(gpus)))
    return {
        group: slots_for(kinds[0][0], kinds[0][1], max_parallel) if len({g for _, g in kinds}) == 1 else [None]
        for group, kinds in members.items()
    }


class SlotPool:
    """The free slots of each group; `take` blocks until one of the item's group is free (or the job stops)."""

    def __init__(self, slots: Mapping[Hashable, Sequence[Slot]]) -> None:
        self._free: dict[Hashable, queue.Queue[Slot]] = {}
        for group, group_slots in slots.items():
            free: queue.Queue[Slot] = queue.Queue()
            for slot in group_slots:
                free.put(slot)
            self._free[group] = free

    def take(self, target: Hashable, stop: Stop) -> Slot:
        while True:
            stop.check()
            try:
                return self._free[target].get(timeout=_POLL_S)
            except queue.Empty:
                continue

    def give_back(self, target: Hashable, slot: Slot) -> None:
        self._free[target].put(slot)


def run_all(
    items: Sequence[Any],
    work: Callable[[Any, Slot], None],
    target_of: Callable[[Any], Hashable],
    pool: SlotPool,
    max_parallel: int,
    stop: Stop,
) -> None:
    """Run `work(item, slot)` for every item, at most `max_parallel` at once and only on a free slot of its group
    (`target_of(item)`).
    max_parallel 1 runs in this thread, in order (a failure or interruption propagates as it happens)."""
    if max_parallel <= 1:
        for item in items:
            target = target_of(item)
            slot = pool.take(target, stop)
            try:
                work(item, slot)
            finally:
                pool.give_back(target, slot)
        return
    with ThreadPoolExecutor(max_workers=max_parallel, thread_name_prefix="candidate") as executor:
        futures = [executor.submit(_run_one, item, work, target_of(item), pool, stop) for item in items]
        _wait_all(futures, stop)


def _run_one(item: Any, work: Callable[[Any, Slot], None], target: Hashable, pool: SlotPool, stop: Stop) -> None:
    if stop:  # the job was interrupted before this item started: it is not started
        return
    slot = pool.take(target, stop)
    try:
        work(item, slot)
    finally:
        pool.give_back(target, slot)


def _wait_all(futures: list[Future], stop: Stop) -> None:
    """Wait for every item; on an interruption (or a worker's unexpected error) stop the rest, wait for the running
    ones to wind down (a second Ctrl-C does not cut their teardown short), then raise the first."""
    first: BaseException | None = None
    try:
        while True:
            done, pending = wait(futures, timeout=_POLL_S, return_when=FIRST_EXCEPTION)
            failed = [f.exception() for f in done if f.exception() is not None]
            if failed or not pending:
                first = failed[0] if failed else None
                break
    except KeyboardInterrupt as interrupt:
        first = interrupt
    if first is not None:
        stop.set(first)
        _wait_quietly(futures)
        raise first


def _wait_quietly(futures: list[Future]) -> None:
    while True:
        try:
            wait(futures)
            return
        except KeyboardInterrupt:
            continue
