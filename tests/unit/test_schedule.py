"""schedule.py: which candidates may run together, the slot pool, and interruption of concurrent candidates."""

from __future__ import annotations

import _thread
import threading
import time

import pytest

from recommender.errors import Interrupted
from recommender.job.schedule import SlotPool, Stop, group_slots, run_all, slot_group, slots_for
from recommender.spec import TargetSpec


@pytest.mark.parametrize(
    "kind, gpus, max_parallel, expected",
    [
        ("sagemaker", (), 3, [None, None, None]),  # separate machines: max_parallel endpoints at once
        ("remote", (), 4, [None]),  # one existing endpoint: candidates on it would measure each other
        ("local", (), 4, [None]),  # CPU: one server at a time on this host's cores
        ("local", (0, 1), 4, [(0,), (1,)]),  # one candidate per GPU, pinned to it
        ("docker", (0, 1, 2), 2, [(0,), (1,)]),
        ("local", (0, 1), 1, [None]),  # max_parallel 1: serial, every GPU
    ],
)
def test_slots_per_target_kind(kind, gpus, max_parallel, expected):
    assert slots_for(kind, gpus, max_parallel) == expected


@pytest.mark.parametrize(
    "targets, expected",
    [
        # a CPU target beside a GPU one on this host: one slot, the CPU server must not share the host
        ([("local", ()), ("docker", (0, 1))], [None]),
        ([("docker", (0, 1)), ("local", ())], [None]),  # whichever comes first
        ([("local", (0, 1)), ("docker", (0, 1))], [(0,), (1,)]),  # the same GPUs: one candidate per GPU, shared
        ([("local", (0, 1)), ("docker", (1,))], [None]),  # different GPUs: a slot of one may not fit the other
        ([("local", ()), ("local", ())], [None]),
    ],
)
def test_targets_on_this_host_merge_their_slots(targets, expected):
    slots = group_slots([("this host", kind, gpus) for kind, gpus in targets], max_parallel=2)
    assert slots == {"this host": expected}


def test_groups_apart_keep_their_own_slots():
    slots = group_slots(
        [("target 0", "sagemaker", ()), ("this host", "local", (0, 1)), ("target 2", "sagemaker", ())], 3
    )
    assert slots == {"target 0": [None] * 3, "this host": [(0,), (1,)], "target 2": [None] * 3}


class Tracker:
    """Work that records which items overlap and on which slot they ran."""

    def __init__(self, seconds: float = 0.2) -> None:
        self.seconds, self.lock = seconds, threading.Lock()
        self.running: set[str] = set()
        self.peak, self.slots, self.together = 0, {}, set()

    def __call__(self, item, slot) -> None:
        with self.lock:
            self.running.add(item[0])
            self.together |= {frozenset(self.running)} if len(self.running) > 1 else set()
            self.peak, self.slots[item[0]] = max(self.peak, len(self.running)), slot
        time.sleep(self.seconds)
        with self.lock:
            self.running.discard(item[0])


def test_items_overlap_up_to_max_parallel_and_never_beyond_their_targets_slots():
    items = [("a1", 0), ("b1", 1), ("a2", 0), ("b2", 1), ("c1", 2)]
    pool = SlotPool({0: [(0,), (1,)], 1: [None], 2: [None, None]})  # a: two GPUs, b: one remote endpoint, c: cloud
    work = Tracker()
    run_all(items, work, lambda item: item[1], pool, max_parallel=3, stop=Stop())
    assert work.peak == 3
    assert not any({"b1", "b2"} <= group for group in work.together)  # one slot: never together
    assert {work.slots["a1"], work.slots["a2"]} == {(0,), (1,)}  # ran together, each pinned to its own GPU


def test_max_parallel_one_runs_in_order_in_this_thread():
    order = []
    run_all(
        ["x", "y", "z"],
        lambda item, slot: order.append((item, threading.current_thread().name)),
        lambda item: 0,
        SlotPool({0: [None]}),
        max_parallel=1,
        stop=Stop(),
    )
    assert order == [(name, threading.main_thread().name) for name in "xyz"]


def test_ctrl_c_in_the_main_thread_stops_every_running_item_and_starts_no_more():
    stop, started, ended = Stop(), [], []

    def work(item, slot) -> None:
        started.append(item)
        if item == "first":
            time.sleep(0.3)
            _thread.interrupt_main()  # Ctrl-C arrives in the main thread, as a signal does
        try:
            for _ in range(100):  # a load loop checking the job's stop at every progress report
                stop.check()
                time.sleep(0.05)
        except Interrupted:
            ended.append(item)  # the pipeline records the candidate interrupted and tears down here
            raise

    with pytest.raises(KeyboardInterrupt):
        run_all(["first", "second", "third", "fourth"], work, lambda item: 0, SlotPool({0: [None, None]}), 2, stop)
    assert sorted(started) == ["first", "second"] and sorted(ended) == ["first", "second"]  # no more were started


def test_local_and_docker_targets_share_this_host_and_remote_hosts_are_apart():
    local_a, local_b = TargetSpec(name="a"), TargetSpec(name="b", kind="docker")
    remote = [TargetSpec(kind="remote", endpoint=f"http://host-{n}:8000") for n in (1, 2)]
    assert slot_group(local_a, 0) == slot_group(local_b, 1)  # two local labels are still one set of cores
    assert slot_group(remote[0], 2) != slot_group(remote[1], 3)


def test_an_infinity_server_shares_this_host_with_triton():
    triton, infinity = TargetSpec(name="triton"), TargetSpec(name="infinity", kind="infinity")
    assert slot_group(triton, 0) == slot_group(infinity, 1)  # one after the other: they would measure each other
