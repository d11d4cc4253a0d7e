"""The lab leaves nothing behind: what a killed run left (namespaces, links, processes inside) is swept by the next."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests.multihost.conftest import ROOT, Server
from tests.multihost.lab import Lab

ASIDE = {"RECOMMENDER_LAB_PREFIX": "rmx", "RECOMMENDER_LAB_SUBNET": "10.232.0", "PYTHONPATH": str(ROOT)}
MAKE = "from tests.multihost.lab import Lab; import time; lab = Lab.create(['a', 'b']); "
MAKE += "lab.popen('b', ['sleep', '300']); print('made', flush=True); time.sleep(300)"
SECOND = "import tests.multihost.lab as lab; lab.LOCK_WAIT_S = 2\ntry:\n    lab.Lab.create(['a'])\n"
SECOND += "except TimeoutError as error:\n    print('waited:', error, lab.leftovers())"
LOOK = "import json; from tests.multihost.lab import leftovers, sweep; before = leftovers(); sweep(); "
LOOK += "print(json.dumps([before, leftovers()]))"


def aside(code: str, **kwargs) -> subprocess.Popen:
    """`code` in a Python process whose lab uses another prefix and subnet (the tier's own lab is untouched)."""
    return subprocess.Popen([sys.executable, "-c", code], env={**os.environ, **ASIDE}, cwd=ROOT, text=True, **kwargs)


def test_what_a_killed_run_left_is_swept_by_the_next(lab: Lab, d1: Server) -> None:
    maker = aside(MAKE, stdout=subprocess.PIPE)
    assert maker.stdout is not None and maker.stdout.readline().strip() == "made"
    sleeper = subprocess.run(["pgrep", "-f", "sleep 300"], capture_output=True, text=True).stdout.split()
    second = aside(SECOND, stdout=subprocess.PIPE).communicate(timeout=60)[0]  # a second run while the first lives
    assert second.startswith("waited: another multihost lab") and "rmx-b" in second  # it waited, swept nothing
    maker.send_signal(signal.SIGKILL)  # no finally runs: the namespaces, links and `sleep` inside are left
    maker.wait(timeout=30)
    looker = aside(LOOK, stdout=subprocess.PIPE)
    before, after = json.loads(looker.communicate(timeout=60)[0])
    assert {"rmx-a", "rmx-b", "rmx-br0"} <= set(before)  # what the killed run left, seen
    assert after == []  # and swept
    time.sleep(0.2)
    alive = subprocess.run(["pgrep", "-f", "sleep 300"], capture_output=True, text=True).stdout.split()
    assert sleeper and not set(sleeper) & set(alive)  # the process left inside a namespace is gone too
    assert lab.pids("d1")  # the tier's own lab was not touched
