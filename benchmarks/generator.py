"""Load-generator efficiency: requests per second per generator core, this platform's load driver beside wrk.

Both tools POST the same KServe v2 JSON body to the null endpoint (recommender.load.null_endpoint, no delay) on
loopback, closed loop, with the same number of connections. The runs alternate (ours, wrk / wrk, ours) and repeat;
the table shows medians and the spread (min..max) over the repeats.

- ours: run_load with one phase of --users users (spawn rate 0). Requests: the successful ones sent and completed in
  the measured window (the first --warmup seconds excluded). CPU: the generator's own per-second CPU % samples
  (Timeline.cpu_percent) summed over the window.
- ours, N workers (--workers 1,2,4): the same with Locust's distributed mode (one master, N worker processes);
  CPU: the workers' per-second CPU % as they report it to the master (the master's own CPU is not counted; it only
  merges rows). Scaling = aggregate requests/s at N workers / at 1 worker; on a host with fewer than N + 1 free cores
  (the server needs one) the workers share cores and scaling cannot reach N.
- wrk: `wrk -t1 -c <users> -d <warmup+duration>s -s post.lua`; requests and duration from the Lua `done` hook
  (non-2xx answers excluded), CPU seconds from the kernel's rusage of the wrk process (os.wait4).

requests/s per core = successful requests / generator CPU seconds. Target: >= 5,000 for ours (printed PASS/FAIL; the
exit code is non-zero only on errors). Run `python benchmarks/generator.py --help` for the options.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import psutil

from measurement import cpu_seconds, ratio, render_table, run_tool, summarise, use_this_checkout, window_stats

use_this_checkout()

from recommender import kserve  # noqa: E402
from recommender.load.null_endpoint import NullEndpoint  # noqa: E402
from recommender.load.runner import LoadRequest, run_load  # noqa: E402
from recommender.payload import inference_bodies  # noqa: E402
from recommender.spec import Phase, PayloadSpec  # noqa: E402

MODEL = "null"
TARGET_PER_CORE = 5000.0
_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = file:read("*a")
file:close()

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "status_errors": %d, "socket_errors": %d, "p50_us": %d, "p95_us": %d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(95)))
end
"""


@dataclass(frozen=True)
class GeneratorRun:
    """One tool's run: successful requests per second, generator CPU (cores used), and the server's CPU (cores).

    The server's cores are its CPU seconds per request over the whole run times the measured rate.
    """

    tool: str
    requests_per_s: float
    generator_cores: float
    server_cores: float
    failures: int

    @property
    def per_core(self) -> float:
        return ratio(self.requests_per_s, self.generator_cores)


def run_ours(endpoint: str, server: psutil.Process, bodies: list[dict], args: argparse.Namespace, work: Path,
             workers: int = 1) -> GeneratorRun:
    phase = Phase(initial_users=args.users, spawn_rate=0, duration_seconds=args.warmup + args.duration)
    before = _cpu_s(server)
    result = run_load(LoadRequest(endpoint, MODEL, bodies, [phase], work, workers=workers))
    server_s_per_request = (_cpu_s(server) - before) / max(1, len(result.requests))
    log, timeline = result.requests, result.timeline
    end = args.warmup + args.duration
    stats = window_stats(log.t_s, log.latency_us, log.ok, args.warmup, end)
    cores = cpu_seconds(timeline.t_s, timeline.cpu_percent, args.warmup, end) / args.duration
    return GeneratorRun(_ours(workers), stats.throughput, cores, server_s_per_request * stats.throughput, stats.failures)


def run_wrk(endpoint: str, server: psutil.Process, body_path: Path, lua_path: Path, args: argparse.Namespace) -> GeneratorRun:
    seconds = args.warmup + args.duration
    command = ["wrk", "-t1", f"-c{args.users}", f"-d{seconds:g}s", "--timeout", "10s", "-s", str(lua_path),
               endpoint + kserve.infer_path(MODEL)]  # fmt: skip
    before = _cpu_s(server)
    run = run_tool(command, env={**os.environ, "BENCH_BODY": str(body_path)})
    output = run.output
    server_cpu_s = _cpu_s(server) - before
    lines = [line for line in output.splitlines() if line.startswith("BENCH_RESULT ")]
    if run.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed (exit {run.returncode}):\n{output}")
    summary = json.loads(lines[-1].removeprefix("BENCH_RESULT "))
    duration_s = summary["duration_us"] / 1e6
    ok = summary["requests"] - summary["status_errors"]
    cores = run.cpu_s / duration_s
    server_cores = server_cpu_s / max(1, summary["requests"]) * ok / duration_s  # server CPU per request x rate
    return GeneratorRun("wrk -t1", ok / duration_s, cores, server_cores, summary["status_errors"] + summary["socket_errors"])


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def measure(args: argparse.Namespace, work: Path) -> dict[str, list[GeneratorRun]]:
    """Alternate the two tools for --repeats rounds against one null endpoint; every run's figures per tool."""
    bodies = inference_bodies(PayloadSpec(sequence_length=args.sequence_length))[:1]  # one body: wrk sends one
    body_path, lua_path = work / "body.json", work / "post.lua"
    body_path.write_text(json.dumps(bodies[0]))
    lua_path.write_text(_LUA)
    runs: dict[str, list[GeneratorRun]] = {"ours": [], "wrk": [], **{f"ours-{n}": [] for n in args.workers if n > 1}}
    endpoint_process = NullEndpoint()
    with endpoint_process as endpoint:
        server = psutil.Process(endpoint_process.process.pid)
        for repeat in range(args.repeats):
            order = ["ours", "wrk", *(f"ours-{n}" for n in args.workers if n > 1)]
            for tool in order if repeat % 2 == 0 else order[::-1]:
                if tool.startswith("ours"):
                    workers = int(tool.split("-")[1]) if "-" in tool else 1
                    run = run_ours(endpoint, server, bodies, args, work / f"{tool}-{repeat}", workers)
                else:
                    run = run_wrk(endpoint, server, body_path, lua_path, args)
                runs[tool].append(run)
                print(f"  repeat {repeat + 1}/{args.repeats} {run.tool:22} {run.requests_per_s:9.0f} req/s  "
                      f"generator {run.generator_cores:.2f} cores  {run.per_core:9.0f} req/s/core  "
                      f"server {run.server_cores:.2f} cores  failures {run.failures}", flush=True)  # fmt: skip
    return runs


def report(runs: dict[str, list[GeneratorRun]], args: argparse.Namespace) -> str:
    rows = []
    for key in runs:
        items = runs[key]
        figures = [summarise([getattr(r, name) for r in items]) for name in ("requests_per_s", "generator_cores", "per_core", "server_cores")]
        rows.append([items[0].tool, *(f"{s.median:,.0f}" if i != 1 and i != 3 else f"{s.median:.2f}" for i, s in enumerate(figures)),
                     figures[2].spread, sum(r.failures for r in items)])  # fmt: skip
    ours = summarise([r.per_core for r in runs["ours"]]).median
    theirs = summarise([r.per_core for r in runs["wrk"]]).median
    table = render_table(
        ["tool", "requests/s", "generator CPU (cores)", "requests/s per core", "server CPU (cores)", "per-core spread (min..max)", "failures"],
        rows,
    )
    verdict = "PASS" if ours >= TARGET_PER_CORE else "FAIL"
    rates = [summarise([r.requests_per_s for r in runs[key]]).median for key in ("ours", "wrk")]
    lines = [
        table,
        "",
        f"ours / wrk, requests/s per core: {ratio(ours, theirs):.3f}",
        f"ours / wrk, requests/s:          {ratio(*rates):.3f}",
        f"target: ours >= {TARGET_PER_CORE:,.0f} requests/s per core -> {verdict} (median {ours:,.0f})",
        *(f"scaling, {key.split('-')[1]} workers / 1 process, requests/s: {ratio(_median_rate(runs[key]), rates[0]):.2f}"
          for key in runs if key.startswith("ours-")),
    ]
    return "\n".join(lines)


def _ours(workers: int) -> str:
    return "ours (Locust driver)" if workers == 1 else f"ours, {workers} workers"


def _median_rate(items: list[GeneratorRun]) -> float:
    return summarise([r.requests_per_s for r in items]).median


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--users", type=int, default=32, help="Locust users = wrk connections (default 32).")
    parser.add_argument("--duration", type=float, default=10.0, help="Measured seconds per run (default 10).")
    parser.add_argument("--warmup", type=float, default=2.0, help="Seconds excluded at the start of our runs; wrk runs them too (default 2).")
    parser.add_argument("--repeats", type=int, default=3, help="Rounds of (ours, wrk), order alternating (default 3).")
    parser.add_argument("--sequence-length", type=int, default=128, help="Tokens in the request body (default 128).")
    parser.add_argument("--workers", type=lambda text: [int(n) for n in text.split(",")], default=[1],
                        help="Also run ours in Locust's distributed mode with these worker counts, e.g. 1,2,4 (default 1).")
    parser.add_argument("--quick", action="store_true", help="Smoke test: 1 round, 3 s measured, 1 s warm-up, 8 users.")
    parser.add_argument("--work-dir", type=Path, default=None, help="Where run files go (default: a temporary folder, removed).")
    args = parser.parse_args(argv)
    if args.quick:
        args.users, args.duration, args.warmup, args.repeats = 8, 3.0, 1.0, 1
    return args


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt  # SIGTERM stops the endpoint and the tools like Ctrl-C does


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    args = parse_args(argv)
    if shutil.which("wrk") is None:
        print("error: `wrk` is not installed; install it with: apt-get install -y wrk", file=sys.stderr)
        return 2
    work = Path(args.work_dir or tempfile.mkdtemp(prefix="bench-generator-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"generator benchmark: null endpoint on loopback, {args.users} users/connections, {args.repeats} x {args.duration:g} s "
          f"measured (+{args.warmup:g} s warm-up), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
    try:
        runs = measure(args, work)
    finally:
        if args.work_dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(report(runs, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
