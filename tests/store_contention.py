"""Several processes on one results database at once (SQLite in the unit tier, a real PostgreSQL server in the
postgres tier): opening a fresh database, racing for an experiment's lease, writing runs side by side.

The parent calls `open_at_once`, `race_for_lease` or `write_at_once`; each starts children running this module
(`python -m tests.store_contention ACTION URL INDEX ...`); each child imports what it needs, says "ready" and waits;
once all are ready the parent says "go" to all of them at once.
"""

from __future__ import annotations

import subprocess
import sys
import time

SPEC = {"name": "contended", "variants": {"instance_counts": [1, 2, 3, 4], "max_batch_sizes": [4, 8]}}
SECONDS = 4  # per-second rows written with every run


def _children(action: str, url: str, count: int, *args: str) -> list[tuple[int, str, str]]:
    """Run `count` children of ACTION at once; (exit code, stdout after "ready", stderr) of each."""
    from tests.integration.test_cli_run import REPO_ROOT, cli_env

    children = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.store_contention", action, url, str(index), *args],
            cwd=REPO_ROOT,
            env=cli_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for index in range(count)
    ]
    ready = [child.stdout.readline().strip() for child in children]
    for child in children:
        child.stdin.write("go\n")
        child.stdin.flush()
    outcomes = []
    for child, said in zip(children, ready, strict=False):
        out, err = child.communicate(timeout=120)
        outcomes.append((child.returncode, out.strip(), f"{said}: {err}"))
    return outcomes


def open_at_once(url: str, count: int = 4) -> list[tuple[int, str, str]]:
    """`count` processes open (and so migrate) the same database at the same moment."""
    return _children("open", url, count)


def race_for_lease(url: str, count: int = 2, hold_s: float = 2.0) -> list[str]:
    """`count` processes try to take the lease of experiment "contended" at once; each prints took or refused."""
    outcomes = _children("lease", url, count, str(hold_s))
    assert all(code == 0 for code, _, _ in outcomes), [err for _, _, err in outcomes]
    return sorted(out for _, out, _ in outcomes)


def write_at_once(url: str, writers: int = 4, runs: int = 3) -> None:
    """`writers` processes each store `runs` finished runs of their own candidate of experiment "contended"."""
    from recommender.spec import ExperimentSpec
    from recommender.store.results import ResultStore

    ResultStore.open(url).save_experiment(ExperimentSpec.model_validate(SPEC))
    outcomes = _children("write", url, writers, str(runs))
    assert all(code == 0 for code, _, _ in outcomes), [err for _, _, err in outcomes]


def _open(url: str) -> None:
    from recommender.store.results import ResultStore

    ResultStore.open(url)


def _lease(url: str, hold_s: str) -> None:
    from recommender.errors import ExperimentLeased
    from recommender.store.lease import Lease
    from recommender.store.results import ResultStore

    try:
        with Lease(ResultStore.open(url).engine, "contended"):
            print("took", flush=True)
            time.sleep(float(hold_s))
    except ExperimentLeased:
        print("refused", flush=True)


def _write(url: str, index: str, runs: str) -> None:
    from recommender.candidates import expand_candidates
    from recommender.metrics.headline import Headline
    from recommender.metrics.records import RequestLog
    from recommender.metrics.summary import per_second_series, summarize_phases
    from recommender.spec import ExperimentSpec
    from recommender.store.results import ResultStore

    store = ResultStore.open(url)
    experiment_id = store.save_experiment(ExperimentSpec.model_validate(SPEC))
    candidate = expand_candidates(ExperimentSpec.model_validate(SPEC))[int(index)]
    import numpy as np

    t = np.arange(0, SECONDS, 0.01)
    log = RequestLog(
        t, np.full(len(t), 5000, dtype=np.int64), np.ones(len(t), dtype=bool), np.ones(len(t), dtype=np.int32)
    )
    for _ in range(int(runs)):
        run_id = store.start_run(store.save_candidate(experiment_id, candidate), "proto", None)
        store.finish_run(
            run_id,
            "ok",
            headline=Headline(invocations_per_minute=6000.0),
            phases=summarize_phases(log, [(0, SECONDS)], warmup_s=1),
            series=per_second_series(log, SECONDS),
        )


if __name__ == "__main__":
    action, url, index, *rest = sys.argv[1:]
    import recommender.store.lease
    import recommender.store.results  # noqa: F401

    print("ready", flush=True)
    sys.stdin.readline()
    {"open": lambda: _open(url), "lease": lambda: _lease(url, *rest), "write": lambda: _write(url, index, *rest)}[
        action
    ]()
