"""A benchmark interrupted with SIGTERM stops its child command and everything the child started (benchmarks/
children.py): the child is told first (SIGTERM: a `recommender run` tears its server down), then its group is killed.
Real processes: a benchmark process, its child and the child's own child."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]

# the child: starts a grandchild that ignores SIGTERM (a server that does not stop), says so, records SIGTERM, waits
CHILD = textwrap.dedent(
    """
    import signal, subprocess, sys, time
    from pathlib import Path
    out = Path(sys.argv[1])
    stubborn = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)"
    grandchild = subprocess.Popen([sys.executable, "-c", stubborn])
    (out / "pids").write_text(f"{grandchild.pid}")
    signal.signal(signal.SIGTERM, lambda *_: ((out / "told").write_text("sigterm"), sys.exit(0)))
    time.sleep(120)
    """
)
BENCHMARK = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[1])
    import children
    children.GRACE_S = 5.0
    children.stop_on_sigterm()
    sys.exit(children.exit_interrupted(lambda: children.run([sys.executable, sys.argv[2], sys.argv[3]]).returncode))
    """
)


def test_sigterm_stops_the_child_first_then_its_whole_group(tmp_path: Path) -> None:
    (tmp_path / "child.py").write_text(CHILD)
    (tmp_path / "benchmark.py").write_text(BENCHMARK)
    benchmark = subprocess.Popen(
        [
            sys.executable,
            str(tmp_path / "benchmark.py"),
            str(ROOT / "benchmarks"),
            str(tmp_path / "child.py"),
            str(tmp_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "pids").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    grandchild = int((tmp_path / "pids").read_text())
    time.sleep(0.2)  # the child's SIGTERM handler is set right after it writes the pid
    benchmark.send_signal(signal.SIGTERM)
    _, err = benchmark.communicate(timeout=30)
    assert benchmark.returncode == 130 and err.startswith("interrupted: ") and "Traceback" not in err
    assert (tmp_path / "told").read_text() == "sigterm"  # the child was told, so it could tear down
    gone = time.monotonic() + 10
    while _alive(grandchild) and time.monotonic() < gone:
        time.sleep(0.05)
    assert not _alive(grandchild), "the child's own child outlived the benchmark"


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_a_finished_child_returns_like_subprocess_run(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import children

    done = children.run([sys.executable, "-c", "print('ok'); raise SystemExit(3)"], capture_output=True, text=True)
    assert (done.returncode, done.stdout, done.stderr) == (3, "ok\n", "")
