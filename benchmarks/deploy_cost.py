"""Where a candidate's deployment time goes: would a tritonserver kept running across candidates save it?

    python benchmarks/deploy_cost.py                  # 3 rounds over 2 candidates of benchmarks/replay_grid100.yaml
    python benchmarks/deploy_cost.py --quick          # 1 round, 1 candidate
    python benchmarks/deploy_cost.py --spec FILE --candidates pt-db-ig1-mbs16@0 --rounds 5

Adaptive search deploys every candidate it probes (issue 24: about 2.5 s of a probe's ~6.3 s on the stored grid), so a
server kept warm across candidates, loading each candidate's model through Triton's model-repository API
(`--model-control-mode=explicit`), looks like a saving. Measured side by side in one run, on the real tritonserver of
the nvidia-pytriton wheel started as the local target starts it (targets/triton_binary.py: its backend folder and
environment), on repositories written by the product's own builder (modelrepo/repository.py), per round and candidate:

  cold    a server started with the model (`--model-control-mode=none`, how the local target deploys) until the
          model is ready;
  server  a server started with no model (`--model-control-mode=explicit`) until it is live;
  load    then the model loaded on that running server (POST /v2/repository/models/model/load) until it answers.

A warm server saves `server` at most, and the ratio load / cold says how much of a deployment would remain. The local
target keeps the repository API closed (targets/local.py); this benchmark opens it on its own loopback servers only.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.children import exit_interrupted, stop_on_sigterm  # noqa: E402
from recommender.candidates import Candidate, expand_candidates  # noqa: E402
from recommender.errors import TargetError  # noqa: E402
from recommender.modelrepo.repository import candidate_repository  # noqa: E402
from recommender.spec import load_spec  # noqa: E402
from recommender.targets.leftovers import remove_shared_memory  # noqa: E402
from recommender.targets.server_process import (  # noqa: E402
    LOOPBACK,
    free_loopback_ports,
    start_in_session,
    stop_session,
)
from recommender.targets.triton_binary import (  # noqa: E402
    preflight,
    prepare_backend_directory,
    server_command,
    server_environment,
)

READY_S = 120.0  # a server or a model not ready in this long fails the benchmark


def label(candidate: Candidate) -> str:
    batching = candidate.dynamic_batching
    return candidate.name + (f"@{batching.max_queue_delay_microseconds}" if batching else "")


class Server:
    """One loopback tritonserver, leader of a session of its own that dies with this process (the local target's
    helpers, targets/server_process.py); on exit the whole session is stopped as the local target stops it: SIGTERM,
    then SIGKILL for what is left (a stub still starting), its /dev/shm regions removed."""

    def __init__(self, binary: Path, backends: Path, env: dict[str, str], repository: Path, mode: str, log: Path):
        http, metrics = free_loopback_ports(2)
        self.base, self.shm_prefix = f"http://{LOOPBACK}:{http}", f"recommender_deploy_cost_{http}_"
        command = server_command(
            binary,
            repository,
            backends,
            address=LOOPBACK,
            http_port=http,
            metrics_port=metrics,
            model_control=mode,
            shm_prefix=self.shm_prefix,
            exit_timeout_secs=5,
        )
        self.process = start_in_session(command, env, log.parent, log)

    def wait_for(self, path: str, started: float) -> float:
        """Seconds from `started` until GET `path` answers 200 (the server exiting or READY_S passing fails)."""
        while time.monotonic() - started < READY_S:
            if self.process.poll() is not None:
                raise RuntimeError(f"tritonserver exited with status {self.process.returncode}")
            try:
                with urllib.request.urlopen(self.base + path, timeout=2):
                    return time.monotonic() - started
            except OSError:
                time.sleep(0.02)
        raise RuntimeError(f"{path} did not answer within {READY_S:g} s")

    def post(self, path: str) -> None:
        request = urllib.request.Request(self.base + path, data=b"{}", method="POST")
        with urllib.request.urlopen(request, timeout=READY_S):
            pass

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *exc: object) -> None:
        stop_session(self.process, stop_timeout=10)  # and its backend stubs
        remove_shared_memory(self.shm_prefix)


def median(values: list[float]) -> str:
    return f"{statistics.median(values):.2f} s (n={len(values)}: {', '.join(f'{v:.2f}' for v in values)})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, default=ROOT / "benchmarks/replay_grid100.yaml")
    parser.add_argument(
        "--candidates",
        nargs="+",
        default=["pt-db-ig1-mbs16@0", "pt-db-ig3-mbs8@1000"],
        help="candidate names as `name@queue-delay-us` for dynamic batching (default: two of the stored grid)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="1 round of the first candidate (the smoke test)")
    args = parser.parse_args()
    stop_on_sigterm()
    names, rounds = (args.candidates[:1], 1) if args.quick else (args.candidates, args.rounds)
    spec = load_spec(args.spec)
    by_label = {label(c): c for c in expand_candidates(spec)}
    unknown = [n for n in names if n not in by_label]
    if unknown:
        print(f"{args.spec}: no candidate {', '.join(unknown)}; it has {', '.join(sorted(by_label))}", file=sys.stderr)
        return 2
    try:
        install = preflight()
    except TargetError as error:
        print(f"{error.message} (hint: {error.hint})", file=sys.stderr)
        return 2
    work, keep = Path(tempfile.mkdtemp(prefix="deploy-cost-")), False
    try:
        repositories = {
            name: candidate_repository(
                spec,
                by_label[name],
                work / name,
                cache_dir=work / "cache",
                model_name="model",
                threads_per_instance=1,
                native=False,
                instance_kind="KIND_CPU",
                gpus=(),
            )
            for name in names
        }
        backends, env, log = prepare_backend_directory(install, work), server_environment(install), work / "server.log"
        cold: list[float] = []
        server: list[float] = []
        load: list[float] = []
        for number in range(rounds):
            for name, repository in repositories.items():
                started = time.monotonic()
                with Server(install.binary, backends, env, repository, "none", log) as one:
                    cold.append(one.wait_for("/v2/models/model/ready", started))
                started = time.monotonic()
                with Server(install.binary, backends, env, repository, "explicit", log) as one:
                    server.append(one.wait_for("/v2/health/live", started))
                    started = time.monotonic()
                    one.post("/v2/repository/models/model/load")
                    load.append(one.wait_for("/v2/models/model/ready", started))
                figures = f"cold {cold[-1]:.2f} s, server {server[-1]:.2f} s, load {load[-1]:.2f} s"
                print(f"round {number + 1}, {name}: {figures}")
    except RuntimeError as error:
        keep = True
        print(f"failed: {error}; the servers' log: {work / 'server.log'}", file=sys.stderr)
        return 1
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    print(f"cold start to model ready (one server per candidate): {median(cold)}")
    print(f"server start, no model (explicit model control):     {median(server)}")
    print(f"model load on that running server:                   {median(load)}")
    ratio = statistics.median(load) / statistics.median(cold)
    print(
        f"a warm server would leave load / cold = {ratio:.2f} of a deployment "
        f"(it saves at most the server start, {statistics.median(server):.2f} s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(exit_interrupted(main))
