"""Hosts on one machine: Linux network namespaces joined by veth pairs to a private bridge (the multihost tier).

    lab = Lab.create(["a", "b"])      # namespaces rmh-a, rmh-b at 10.231.0.1, .2; the bridge at 10.231.0.254
    lab.popen("a", [...])             # a process inside host a (its own UTS namespace: hostname rmh-a)
    lab.cut("b") / lab.restore("b")   # b's link down / up
    lab.remove()                      # every process inside, every namespace and link, the bridge

A slower link is delay_proxy.py (a TCP relay that holds every chunk for a fixed time): this machine's kernel has no
`sch_netem` (nor `prio`), so `tc netem` cannot be used here.

Everything the tier creates is named with PREFIX, so `sweep()` finds and removes what an interrupted run left
(called before a lab is created and on every exit path). Traffic stays on the bridge: no route leaves it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

PREFIX = os.environ.get("RECOMMENDER_LAB_PREFIX", "rmh")  # another prefix: a lab beside the tier's (test_lab.py)
BRIDGE = f"{PREFIX}-br0"
SUBNET = os.environ.get("RECOMMENDER_LAB_SUBNET", "10.231.0")
BRIDGE_ADDRESS = f"{SUBNET}.254"
ADDRESSES = {"a": 1, "b": 2, "c": 3, "d1": 11, "d2": 12, "e": 20}
LOCK = Path(tempfile.gettempdir()) / f"recommender-lab-{PREFIX}.lock"  # one lab per prefix on this machine
LOCK_WAIT_S = 1200.0


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(["ip", *args], capture_output=True, text=True, check=check, timeout=30)


def why_unavailable() -> str | None:
    """None where namespaces can be made here, else why not (the tier is skipped with it)."""
    if shutil.which("ip") is None or shutil.which("unshare") is None:
        return "iproute2 (ip) and util-linux (unshare) are needed: apt-get install iproute2 util-linux"
    if os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    probe = f"{PREFIX}-probe"
    made = ip("netns", "add", probe, check=False)
    ip("netns", "del", probe, check=False)
    return None if made.returncode == 0 else f"ip netns add failed: {made.stderr.strip()}"


def namespace(host: str) -> str:
    return f"{PREFIX}-{host}"


def address(host: str) -> str:
    return f"{SUBNET}.{ADDRESSES[host]}"


def _exclusive(path: Path, wait_s: float) -> IO[str]:
    """An exclusive lock on `path`, held until the returned file is closed (or its process dies): two test runs on
    one machine never share, or sweep, each other's lab; the second waits for the first."""
    handle = open(path, "w")  # noqa: SIM115 (held open for the lab's life)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return handle
        except BlockingIOError:
            if time.monotonic() > deadline:
                handle.close()
                raise TimeoutError(f"another multihost lab ({path}) was still running after {wait_s:.0f} s") from None
            time.sleep(1)


@dataclass
class Lab:
    hosts: list[str]
    processes: list[subprocess.Popen] = field(default_factory=list)
    lock: IO[str] | None = None

    @classmethod
    def create(cls, hosts: list[str]) -> Lab:
        lock = _exclusive(LOCK, LOCK_WAIT_S)
        sweep()  # only what a dead run of this prefix left: a live one would hold the lock
        lab = cls(list(hosts), lock=lock)
        try:
            ip("link", "add", BRIDGE, "type", "bridge")
            ip("addr", "add", f"{BRIDGE_ADDRESS}/24", "dev", BRIDGE)
            ip("link", "set", BRIDGE, "up")
            for host in hosts:
                lab._add_host(host)
        except BaseException:
            sweep()
            lock.close()
            raise
        return lab

    def _add_host(self, host: str) -> None:
        name, outside = namespace(host), namespace(host)
        ip("netns", "add", name)
        ip("link", "add", outside, "type", "veth", "peer", "name", "eth0", "netns", name)
        ip("link", "set", outside, "master", BRIDGE)
        ip("link", "set", outside, "up")
        for command in (
            ("addr", "add", f"{address(host)}/24", "dev", "eth0"),
            ("link", "set", "eth0", "up"),
            ("link", "set", "lo", "up"),
        ):
            ip("netns", "exec", name, "ip", *command)

    def command(self, host: str, argv: list[str]) -> list[str]:
        """`argv` inside `host`: its network namespace and a UTS namespace whose hostname is the host's name."""
        inner = f'hostname {namespace(host)} && exec "$@"'
        return ["ip", "netns", "exec", namespace(host), "unshare", "--uts", "sh", "-c", inner, "sh", *argv]

    def popen(self, host: str, argv: list[str], **kwargs) -> subprocess.Popen:
        process = subprocess.Popen(self.command(host, argv), start_new_session=True, **kwargs)
        self.processes.append(process)
        return process

    def run(self, host: str, argv: list[str], timeout: float, **kwargs) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(host, argv), timeout=timeout, capture_output=True, text=True, **kwargs)

    def cut(self, host: str) -> None:
        """The host's link down (its cable pulled): nothing reaches it or leaves it."""
        ip("link", "set", namespace(host), "down")

    def restore(self, host: str) -> None:
        """The link back up. First every TCP connection left across the cut is dropped (`ss -K`): a request sent
        into the cut would otherwise reach the server later, retransmitted, and be counted in the next scenario."""
        for other in self.hosts:
            if other != host:
                ip("netns", "exec", namespace(other), "ss", "-tanK", "dst", address(host))
        if not self.pids(host):  # what ran on the cut host is gone: its connections are orphans
            ip("netns", "exec", namespace(host), "ss", "-tanK")
        ip("link", "set", namespace(host), "up")

    def stop(self, host: str) -> None:
        """Kill every process inside `host` (what a scenario started there and left behind)."""
        for pid in self.pids(host):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def pids(self, host: str) -> list[int]:
        found = ip("netns", "pids", namespace(host), check=False).stdout.split()
        return [int(pid) for pid in found if pid.isdigit()]

    def remove(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                _kill_group(process.pid)
        sweep()
        for process in self.processes:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=10)
        if self.lock is not None:
            self.lock.close()


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def sweep() -> None:
    """Remove everything named with PREFIX: processes inside its namespaces, the namespaces, links, the bridge."""
    names = [n.split()[0] for n in ip("netns", "list", check=False).stdout.splitlines() if n.startswith(PREFIX)]
    for name in names:
        for pid in ip("netns", "pids", name, check=False).stdout.split():
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pid), signal.SIGKILL)
    deadline = time.monotonic() + 10
    while names and any(ip("netns", "pids", n, check=False).stdout.strip() for n in names):
        if time.monotonic() > deadline:
            break
        time.sleep(0.1)
    for name in names:
        ip("netns", "del", name, check=False)
    for region in shm_regions():  # a killed backend stub cannot unlink its regions
        region.unlink(missing_ok=True)
    links = ip("-o", "link", "show", check=False).stdout.splitlines()
    for line in links:
        device = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        if device.startswith(PREFIX):
            ip("link", "del", device, check=False)


def shm_regions() -> list[Path]:
    """The Python backend's /dev/shm regions of the tier's servers (named `PREFIX_host_`: conftest.start_triton)."""
    return sorted(Path("/dev/shm").glob(f"{PREFIX}_*"))


def leftovers() -> list[str]:
    """What of the tier is still there (namespaces, links and /dev/shm regions named with PREFIX): empty after
    `remove`/`sweep`."""
    spaces = [n.split()[0] for n in ip("netns", "list", check=False).stdout.splitlines() if n.startswith(PREFIX)]
    links = [
        line.split(":")[1].strip().split("@")[0]
        for line in ip("-o", "link", "show", check=False).stdout.splitlines()
        if ":" in line and line.split(":")[1].strip().startswith(PREFIX)
    ]
    return spaces + links + [str(region) for region in shm_regions()]
