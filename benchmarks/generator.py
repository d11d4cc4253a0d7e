"""Load-generator efficiency: requests per second per generator core, this platform's load driver beside wrk.

Both tools POST the same KServe v2 JSON body to the null endpoint (recommender.load.null_endpoint, no delay) on
loopback, closed loop, with the same number of connections. The runs alternate (ours, wrk / wrk, ours) and repeat;
the table shows medians and the spread (min..max) over the repeats.

- ours: run_load with one phase of --users users (spawn rate 0), once per HTTP client of the Locust user (--clients):
  FastHttpUser (Locust's, with its request events and response wrapper) and a raw geventhttpclient connection per
  user (locustfile.RawInferenceUser: no Locust request event, no wrapper). Requests: the successful ones sent and
  completed in the measured window (the first --warmup seconds excluded). CPU: the generator's own per-second CPU %
  samples (Timeline.cpu_percent) summed over the window.
- ours, N workers (--workers 1,2,4): the first client in Locust's distributed mode (one master, N worker processes);
  CPU: the workers' per-second CPU % as they report it to the master (the master's own CPU is not counted; it only
  merges rows). Scaling = aggregate requests/s at N workers / at 1 worker; on a host with fewer than N + 1 free cores
  (the server needs one) the workers share cores and scaling cannot reach N.
- added latency at concurrency 1 (unless --no-latency): every client and wrk again with 1 user / 1 connection, in the
  same rounds; added = our median p50 - wrk's median p50 (wrk's own latency percentile at -c1). The null endpoint's
  service time and loopback are in both, so the difference is the generator's own time per request beyond wrk's.
- wrk: `wrk -t1 -c <users> -d <warmup+duration>s -s post.lua`; requests and duration from the Lua `done` hook
  (non-2xx answers excluded), CPU seconds from the kernel's rusage of the wrk process (os.wait4).

requests/s per core = successful requests / generator CPU seconds. Targets: >= 5,000 for ours, <= 0.3 ms added at
concurrency 1 (printed PASS/FAIL per client; the exit code is non-zero only on errors). Run `python
benchmarks/generator.py --help` for the options.
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

from recommender.load.null_endpoint import NullEndpoint  # noqa: E402
from recommender.load.payload import inference_bodies  # noqa: E402
from recommender.load.runner import HTTP_CLIENTS, LoadRequest, run_load  # noqa: E402
from recommender.spec import PayloadSpec, Phase  # noqa: E402
from recommender.targets import kserve  # noqa: E402

MODEL = "null"
TARGET_PER_CORE = 5000.0
TARGET_ADDED_MS = 0.3
CLIENT_LABELS = {"fasthttp": "FastHttpUser", "geventhttpclient": "raw geventhttpclient"}
_LUA = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = file:read("*a")
file:close()

done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests": %d, "duration_us": %d, "status_errors": %d, ' ..
    '"socket_errors": %d, "p50_us": %d, "p95_us": %d}\\n',
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(95)))
end
"""


@dataclass(frozen=True)
class GeneratorRun:
    """One tool's run: successful requests per second, generator CPU (cores used), the server's CPU (cores), p50.

    The server's cores are its CPU seconds per request over the whole run times the measured rate.
    """

    tool: str
    requests_per_s: float
    generator_cores: float
    server_cores: float
    failures: int
    p50_ms: float

    @property
    def per_core(self) -> float:
        return ratio(self.requests_per_s, self.generator_cores)


@dataclass(frozen=True)
class Tool:
    """One line of the tables: ours with an HTTP client and worker count, or wrk; at --users or at 1 connection."""

    client: str  # a key of HTTP_CLIENTS, or "wrk"
    users: int
    workers: int = 1

    @property
    def label(self) -> str:
        name = "wrk -t1" if self.client == "wrk" else f"ours, {CLIENT_LABELS[self.client]}"
        return name + (f", {self.workers} workers" if self.workers > 1 else "") + (", c=1" if self.users == 1 else "")


def run_ours(
    endpoint: str, server: psutil.Process, bodies: list[dict], args: argparse.Namespace, work: Path, tool: Tool
) -> GeneratorRun:
    phase = Phase(initial_users=tool.users, spawn_rate=0, duration_seconds=args.warmup + args.duration)
    before = _cpu_s(server)
    result = run_load(LoadRequest(endpoint, MODEL, bodies, [phase], work, workers=tool.workers, client=tool.client))
    server_s_per_request = (_cpu_s(server) - before) / max(1, len(result.requests))
    log, timeline = result.requests, result.timeline
    end = args.warmup + args.duration
    stats = window_stats(log.t_s, log.latency_us, log.ok, args.warmup, end)
    cores = cpu_seconds(timeline.t_s, timeline.cpu_percent, args.warmup, end) / args.duration
    return GeneratorRun(
        tool.label, stats.throughput, cores, server_s_per_request * stats.throughput, stats.failures, stats.p50_ms
    )


def run_wrk(
    endpoint: str, server: psutil.Process, body_path: Path, lua_path: Path, args: argparse.Namespace, tool: Tool
) -> GeneratorRun:
    seconds = args.warmup + args.duration
    command = [
        "wrk",
        "-t1",
        f"-c{tool.users}",
        f"-d{seconds:g}s",
        "--timeout",
        "10s",
        "-s",
        str(lua_path),
        endpoint + kserve.infer_path(MODEL),
    ]
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
    return GeneratorRun(
        tool.label,
        ok / duration_s,
        cores,
        server_cores,
        summary["status_errors"] + summary["socket_errors"],
        summary["p50_us"] / 1000,
    )


def _cpu_s(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def plan_tools(args: argparse.Namespace) -> list[Tool]:
    """Every client and wrk at --users; more workers with the first client; every client and wrk at 1 connection."""
    tools = [*(Tool(client, args.users) for client in args.clients), Tool("wrk", args.users)]
    tools += [Tool(args.clients[0], args.users, n) for n in args.workers if n > 1]
    return tools + ([*(Tool(client, 1) for client in args.clients), Tool("wrk", 1)] if args.latency else [])


def measure(args: argparse.Namespace, work: Path) -> dict[Tool, list[GeneratorRun]]:
    """Alternate the tools for --repeats rounds against one null endpoint; every run's figures per tool."""
    bodies = inference_bodies(PayloadSpec(sequence_length=args.sequence_length))[:1]  # one body: wrk sends one
    body_path, lua_path = work / "body.json", work / "post.lua"
    body_path.write_text(json.dumps(bodies[0]))
    lua_path.write_text(_LUA)
    tools = plan_tools(args)
    runs: dict[Tool, list[GeneratorRun]] = {tool: [] for tool in tools}
    endpoint_process = NullEndpoint()
    with endpoint_process as endpoint:
        server = psutil.Process(endpoint_process.process.pid)
        for repeat in range(args.repeats):
            for number, tool in enumerate(tools if repeat % 2 == 0 else tools[::-1]):
                if tool.client == "wrk":
                    run = run_wrk(endpoint, server, body_path, lua_path, args, tool)
                else:
                    run = run_ours(endpoint, server, bodies, args, work / f"run-{repeat}-{number}", tool)
                runs[tool].append(run)
                print(
                    f"  repeat {repeat + 1}/{args.repeats} {run.tool:40} {run.requests_per_s:9.0f} req/s  "
                    f"generator {run.generator_cores:.2f} cores  {run.per_core:9.0f} req/s/core  "
                    f"server {run.server_cores:.2f} cores  p50 {run.p50_ms:.3f} ms  failures {run.failures}",
                    flush=True,
                )
    return runs


def report(runs: dict[Tool, list[GeneratorRun]], args: argparse.Namespace) -> str:
    loaded = {tool: items for tool, items in runs.items() if tool.users == args.users}
    rows = []
    for tool, items in loaded.items():
        figures = [
            summarise([getattr(r, name) for r in items])
            for name in ("requests_per_s", "generator_cores", "per_core", "server_cores")
        ]
        rows.append(
            [
                tool.label,
                *(f"{s.median:,.0f}" if i != 1 and i != 3 else f"{s.median:.2f}" for i, s in enumerate(figures)),
                figures[2].spread,
                sum(r.failures for r in items),
            ]
        )
    table = render_table(
        [
            "tool",
            "requests/s",
            "generator CPU (cores)",
            "requests/s per core",
            "server CPU (cores)",
            "per-core spread (min..max)",
            "failures",
        ],
        rows,
    )
    wrk = Tool("wrk", args.users)
    theirs, wrk_rate = _median(runs[wrk], "per_core"), _median(runs[wrk], "requests_per_s")
    lines = [table, ""]
    for client in args.clients:
        ours = _median(runs[Tool(client, args.users)], "per_core")
        verdict = "PASS" if ours >= TARGET_PER_CORE else "FAIL"
        lines += [
            f"{CLIENT_LABELS[client]} / wrk: requests/s per core {ratio(ours, theirs):.3f}, requests/s "
            f"{ratio(_median(runs[Tool(client, args.users)], 'requests_per_s'), wrk_rate):.3f}",
            f"target: {CLIENT_LABELS[client]} >= {TARGET_PER_CORE:,.0f} requests/s per core -> {verdict} "
            f"(median {ours:,.0f})",
        ]
    single = _median(runs[Tool(args.clients[0], args.users)], "requests_per_s")
    lines += [
        f"scaling, {tool.workers} workers / 1 process, "
        f"requests/s: {ratio(_median(items, 'requests_per_s'), single):.2f}"
        for tool, items in loaded.items()
        if tool.workers > 1
    ]
    return "\n".join(lines + (latency_report(runs) if args.latency else []))


def latency_report(runs: dict[Tool, list[GeneratorRun]]) -> list[str]:
    """At 1 connection: each client's p50 beside wrk's p50 (same endpoint, same body, same round): the added latency."""
    wrk = _median(runs[Tool("wrk", 1)], "p50_ms")
    rows, verdicts = [], []
    for tool, items in runs.items():
        if tool.users != 1:
            continue
        p50 = _median(items, "p50_ms")
        added = p50 - wrk
        rows.append(
            [
                tool.label,
                f"{p50:.3f}",
                summarise([r.p50_ms for r in items]).spread,
                "" if tool.client == "wrk" else f"{added:+.3f}",
            ]
        )
        if tool.client != "wrk":
            verdicts.append(
                f"target: {CLIENT_LABELS[tool.client]} adds <= {TARGET_ADDED_MS} ms at c=1 -> "
                f"{'PASS' if added <= TARGET_ADDED_MS else 'FAIL'} ({added:+.3f} ms)"
            )
    return [
        "",
        "Added latency at concurrency 1 (our p50 minus wrk's p50 at -c1, medians over rounds):",
        "",
        render_table(["tool", "p50 (ms)", "p50 spread (min..max)", "added vs wrk (ms)"], rows),
        "",
        *verdicts,
    ]


def _median(items: list[GeneratorRun], name: str) -> float:
    return summarise([getattr(r, name) for r in items]).median


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--users", type=int, default=32, help="Locust users = wrk connections (default 32).")
    parser.add_argument("--duration", type=float, default=10.0, help="Measured seconds per run (default 10).")
    parser.add_argument(
        "--warmup",
        type=float,
        default=2.0,
        help="Seconds excluded at the start of our runs; wrk runs them too (default 2).",
    )
    parser.add_argument("--repeats", type=int, default=3, help="Rounds of every tool, order alternating (default 3).")
    parser.add_argument("--sequence-length", type=int, default=128, help="Tokens in the request body (default 128).")
    parser.add_argument(
        "--workers",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1],
        help="Also run ours in Locust's distributed mode with these worker counts, e.g. 1,2,4 (default 1).",
    )
    parser.add_argument(
        "--clients",
        type=lambda text: text.split(","),
        default=list(HTTP_CLIENTS),
        help=f"Our HTTP clients to measure side by side (default {','.join(HTTP_CLIENTS)}).",
    )
    parser.add_argument(
        "--no-latency",
        dest="latency",
        action="store_false",
        help="Skip the runs at 1 connection (added latency against wrk -c1).",
    )
    parser.add_argument("--quick", action="store_true", help="Smoke test: 1 round, 3 s measured, 1 s warm-up, 8 users.")
    parser.add_argument(
        "--work-dir", type=Path, default=None, help="Where run files go (default: a temporary folder, removed)."
    )
    args = parser.parse_args(argv)
    if unknown := set(args.clients) - set(HTTP_CLIENTS):
        parser.error(f"--clients: unknown {', '.join(sorted(unknown))}; use {', '.join(HTTP_CLIENTS)}")
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
    print(
        f"generator benchmark: null endpoint on loopback, {args.users} users/connections, "
        f"{args.repeats} x {args.duration:g} s "
        f"measured (+{args.warmup:g} s warm-up), {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
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
