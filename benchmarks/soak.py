"""Soak: a scripted mixed run that must end with no orphan process, no lost row and the same stored candidates as
an uninterrupted run.

One reference run (uninterrupted), then rounds until --minutes have passed (one round with --quick), each in the
same working directory with --fresh: start `recommender run`, SIGKILL tritonserver during the first candidate's load
(that candidate is recorded failed), SIGTERM the job during a later load (exit 143), then resume it (exit 0; the
failed and interrupted candidates are measured again). After each round: no tritonserver, stub or Locust process
left under the working directory, no run row left 'running', the candidates' final statuses equal the reference's,
the resume added one run row per candidate it had to measure (none lost), and every ok run has its steady-state
windows stored. Prints one line per round and a summary table; exit 1 when a check failed.

    python benchmarks/soak.py --minutes 30
    python benchmarks/soak.py --quick
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.store.results import ResultStore  # noqa: E402

SPEC = """name: soak
model:
  source: bert
  architecture: {{layers: 1, hidden: 32, heads: 2, intermediate: 64}}
payload: {{sequence_length: 16}}
variants: {{optimizations: [pt, onnx], dynamic_batching: [false, true], instance_counts: [1], max_batch_sizes: [4]}}
traffic:
  warmup_seconds: 1
  repeats: {repeats}
  phases: [{{initial_users: 1, spawn_rate: 0, duration_seconds: {seconds}}}]
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0, help="Keep running rounds this long (default 30).")
    parser.add_argument("--quick", action="store_true", help="One round, short phases (the smoke test).")
    parser.add_argument("--workdir", type=Path, default=None, help="Where to run (default: a temporary directory).")
    args = parser.parse_args()
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="recommender-soak-"))
    spec = SPEC.format(repeats=1 if args.quick else 2, seconds=3 if args.quick else 6)
    for name in ("reference", "soak"):
        (workdir / name).mkdir(parents=True, exist_ok=True)
        (workdir / name / "soak.yaml").write_text(spec)
    started = time.monotonic()
    reference_run = cli(workdir / "reference", "run", "soak.yaml")
    if reference_run.returncode != 0:
        print(reference_run.stdout + reference_run.stderr)
        return 1
    reference = final_statuses(workdir / "reference")
    rounds, failures = 0, []
    while rounds == 0 or (not args.quick and time.monotonic() - started < args.minutes * 60):
        rounds += 1
        failures += [
            f"round {rounds}: {problem}" for problem in soak_round(workdir / "soak", reference, fresh=rounds > 1)
        ]
    print(
        f"| rounds | minutes | candidates | reference statuses | problems |\n|---|---|---|---|---|\n"
        f"| {rounds} | {(time.monotonic() - started) / 60:.1f} | {len(reference)} | "
        f"{sorted(set(reference.values()))} | {len(failures)} |"
    )
    for failure in failures:
        print(failure)
    print("soak -> " + ("PASS" if not failures else "FAIL"))
    return 1 if failures else 0


def soak_round(workdir: Path, reference: dict[str, str], fresh: bool) -> list[str]:
    """One killed server, one SIGTERM, one resume; returns the problems found."""
    problems = []
    job = start(workdir, fresh)
    kill_during_load(workdir, job, lambda: next(p for p in servers_under(workdir) if p.name() == "tritonserver").kill())
    kill_during_load(workdir, job, lambda: job.send_signal(signal.SIGTERM), skip=1)
    code = job.wait(timeout=300)
    problems += [f"SIGTERM exit {code}, not 143"] if code != 143 else []
    before = final_statuses(workdir)
    rows_expected = len(list(store(workdir).runs("soak"))) + sum(before.get(name) != "ok" for name in reference)
    resumed = cli(workdir, "run", "soak.yaml")
    problems += [f"resume exit {resumed.returncode}: {resumed.stderr[-300:]}"] if resumed.returncode != 0 else []
    orphans = servers_under(workdir) + generators_under(workdir)
    problems += [f"{len(orphans)} orphan process(es): {[p.pid for p in orphans]}"] if orphans else []
    runs = list(store(workdir).runs("soak"))
    running = [r for r in runs if r.status == "running"]
    problems += [f"{len(running)} run row(s) left running"] if running else []
    problems += (
        [f"{rows_expected - len(runs)} run row(s) lost: {len(runs)} stored, {rows_expected} expected"]
        if len(runs) != rows_expected
        else []
    )
    empty = lost_measurements(workdir)
    problems += [f"ok run(s) without stored windows: {empty}"] if empty else []
    stored = final_statuses(workdir)
    problems += [f"stored candidates {stored} differ from the reference {reference}"] if stored != reference else []
    print(
        f"round: SIGTERM exit {code}, resume exit {resumed.returncode}, orphans {len(orphans)}, "
        f"running rows {len(running)}, runs {len(runs)} (expected {rows_expected}) {sorted(r.status for r in runs)}, "
        f"ok runs without windows {len(empty)}, same candidates {stored == reference}"
    )
    return problems


def cli(workdir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "recommender", *args],
        cwd=workdir,
        env=child_env(),
        text=True,
        capture_output=True,
        timeout=1800,
    )


def start(workdir: Path, fresh: bool) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "recommender", "run", "soak.yaml", *(["--fresh"] if fresh else [])],
        cwd=workdir,
        env=child_env(),
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def child_env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def kill_during_load(workdir: Path, job: subprocess.Popen[str], act, skip: int = 0) -> None:
    """Wait for a load to start (after `skip` further loads), 1 s into it run `act`."""
    seen: set[int] = set()
    deadline = time.monotonic() + 600
    while job.poll() is None and time.monotonic() < deadline:
        fresh = {p.pid for p in generators_under(workdir)} - seen
        if fresh and len(seen) >= skip:
            time.sleep(1.0)
            act()
            return
        seen |= fresh
        time.sleep(0.2)


def servers_under(path: Path) -> list[psutil.Process]:
    return [
        p
        for p in _processes()
        if str(path) in _cmdline(p) and ("tritonserver" in _cmdline(p) or "backend_stub" in _cmdline(p))
    ]


def generators_under(path: Path) -> list[psutil.Process]:
    found = []
    for proc in _processes():
        try:
            if "locust" in _cmdline(proc) and str(path) in proc.cwd():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def _processes() -> list[psutil.Process]:
    return list(psutil.process_iter(["cmdline"]))


def _cmdline(proc: psutil.Process) -> str:
    return " ".join(proc.info["cmdline"] or [])


def store(workdir: Path) -> ResultStore:
    return ResultStore.open(f"sqlite:///{workdir / '.recommender/results.db'}")


def lost_measurements(workdir: Path) -> list[int]:
    """Ids of ok runs whose steady-state windows are missing (a measurement stored only in part)."""
    results = store(workdir)
    return [run.id for run in results.runs("soak") if run.status == "ok" and not results.windows(run.id)]


def final_statuses(workdir: Path) -> dict[str, str]:
    return {result.name: result.status for result in store(workdir).results("soak")}


if __name__ == "__main__":
    sys.exit(main())
