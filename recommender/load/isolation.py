"""Generator and server on disjoint CPU sets (docs/design.md "Load"): which CPUs each gets; pinning a running server.

The generator's processes are pinned when they start (generators.py); a local server already running is pinned here,
thread by thread (os.sched_setaffinity on a pid moves only that thread on Linux; its existing threads are moved one
by one, threads it creates later inherit). Only processes on this host can be pinned: a remote server gets nothing.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import psutil

from recommender.errors import LoadError
from recommender.load.generators import generator_cpus


@dataclass(frozen=True)
class CpuSplit:
    """The generator's CPUs and the server's (both None: no isolation, e.g. a 2-core host)."""

    generator: tuple[int, ...] | None
    server: tuple[int, ...] | None

    def to_dict(self) -> dict[str, list[int] | None]:
        return {
            "generator_cpus": list(self.generator) if self.generator else None,
            "server_cpus": list(self.server) if self.server else None,
        }


def split_cpus(setting: Sequence[int] | None, available: Sequence[int] | None = None) -> CpuSplit:
    """The generator gets `setting` (or the default of generators.generator_cpus), the server every other CPU."""
    cpus = sorted(os.sched_getaffinity(0) if available is None else available)
    missing = sorted(set(setting or ()) - set(cpus))
    if missing:
        raise LoadError(
            f"traffic.generator_cpus names CPU {', '.join(map(str, missing))}, which this process may not use "
            f"(available: {', '.join(map(str, cpus))})",
            hint="pick CPUs from the available ones, or leave "
            "generator_cpus out (isolated by default on hosts with 4 or more CPUs)",
        )
    generator = generator_cpus(setting, cpus)
    if generator is None:
        return CpuSplit(None, None)
    server = tuple(cpu for cpu in cpus if cpu not in generator)
    return CpuSplit(generator, server or None)


def pin_processes(pids: Sequence[int], cpus: Sequence[int]) -> int:
    """Pin every thread of every process to `cpus`; how many threads were pinned (gone processes are skipped)."""
    pinned = 0
    for pid in pids:
        try:
            threads = [thread.id for thread in psutil.Process(pid).threads()]
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for thread in threads:
            try:
                os.sched_setaffinity(thread, cpus)
                pinned += 1
            except (ProcessLookupError, PermissionError):
                continue
    return pinned
