"""Load-generator efficiency: requests per second per generator core, this platform's load driver beside wrk.

Both tools POST the same KServe v2 JSON body to the null endpoint (recommender.load.null_endpoint, no delay) on
loopback, closed loop, with the same number of connections. The runs alternate (ours, wrk / wrk, ours) and repeat;
the table shows medians and the spread (min..max) over the repeats.

Both tools are scored by the same rule on their own per-request records (as benchmarks/fidelity.py does): each run
lasts warm-up + duration + 1 s; the window is [first send + --warmup, + --duration] on the tool's own clock; requests
count when sent in the window and answered by its end; throughput = the successful ones / the window's length;
p50 = numpy's (linear) percentile of their exact latencies; CPU = the tool's CPU seconds in the window (cumulative
CPU samples read at the window's ends) / the window's length; the server's CPU (the null endpoint) the same way.
A run whose records stop before its window's end is refused.

- ours: run_load with one phase of --users users (spawn rate 0), once per HTTP client of the Locust user (--clients):
  FastHttpUser (Locust's, with its request events and response wrapper) and a raw geventhttpclient connection per
  user (locustfile.RawInferenceUser: no Locust request event, no wrapper). Records: the exact RequestLog. CPU: the
  generator's own per-second CPU % samples (Timeline.cpu_percent).
- ours, N workers (--workers 1,2,4): the first client in Locust's distributed mode (one master, N worker processes);
  CPU: the workers' per-second CPU % as they report it to the master (the master's own CPU is not counted; it only
  merges rows). Scaling = aggregate requests/s at N workers / at 1 worker; on a host with fewer than N + 1 free cores
  (the server needs one) the workers share cores and scaling cannot reach N.
- wrk: `wrk -t1 -c <users> -d <ceil(warmup + duration + 1)>s -s post.lua`; the Lua `request` and `response` hooks
  log each send and each answer (CLOCK_MONOTONIC, status code), the `done` hook writes them to a file. At one
  connection sends and answers pair one to one (latency per request); with more, the count by the same rule is
  answers by the window's end minus sends before its start (exact in a closed loop where no request is lost: wrk
  reported no socket error and no latency longer than the window), and no latency figure is taken. CPU: psutil
  samples of the wrk process every 0.1 s. The hooks cost wrk CPU (10-15 % of its requests per core on this host,
  measured against a bare wrk in docs/benchmarks.md): the reference is an instrumented wrk.
- added latency at concurrency 1 (unless --no-latency): every client and wrk again with 1 user / 1 connection, in the
  same rounds; added = our median p50 - wrk's median p50. The null endpoint's service time and loopback are in both,
  so the difference is the generator's own time per request beyond wrk's.

requests/s per core = successful requests / generator CPU seconds. Targets: >= 5,000 for ours, <= 0.3 ms added at
concurrency 1 (printed PASS/FAIL per client; the exit code is non-zero only on errors). Run `python
benchmarks/generator.py --help` for the options.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import children
import numpy as np
from measurement import (
    TAIL_S,
    CpuSampler,
    WindowStats,
    cpu_seconds,
    log_window,
    ratio,
    render_table,
    run_tool,
    summarise,
    use_this_checkout,
    window_stats,
)

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
-- Per-request records for benchmarks/generator.py: every send and every answer on CLOCK_MONOTONIC (the clock of
-- Python's time.monotonic()), microseconds, and each answer's status; written to $BENCH_LOG by the done hook.
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local clock = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, clock)  -- 1: CLOCK_MONOTONIC
  return tonumber(clock.tv_sec) * 1000000 + math.floor(tonumber(clock.tv_nsec) / 1000)
end

wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local file = assert(io.open(os.getenv("BENCH_BODY"), "rb"))
wrk.body = file:read("*a")
file:close()

local threads = {}
function setup(thread)
  table.insert(threads, thread)
end

local prepared
sends, answers, codes, sent, answered = {}, {}, {}, 0, 0
function init(args)
  prepared = wrk.format()
end
function request()
  sent = sent + 1
  sends[sent] = now_us()
  return prepared
end
function response(status, headers, body)
  answered = answered + 1
  answers[answered] = now_us()
  codes[answered] = status
end

function done(summary, latency, requests)
  local out = assert(io.open(os.getenv("BENCH_LOG"), "w"))
  local e = summary.errors
  out:write(string.format('{"socket_errors": %d, "max_latency_us": %d, "threads": [',
    e.connect + e.read + e.write + e.timeout, latency.max))
  for i, thread in ipairs(threads) do
    out:write(i > 1 and ", " or "", '{"sends": [', table.concat(thread:get("sends"), ","),
      '], "answers": [', table.concat(thread:get("answers"), ","),
      '], "codes": [', table.concat(thread:get("codes"), ","), ']}')
  end
  out:write("]}\\n")
  out:close()
end
"""


@dataclass(frozen=True)
class WrkLog:
    """What the Lua hooks logged in one wrk thread: send and answer times (s, CLOCK_MONOTONIC), answer statuses."""

    sends_s: np.ndarray
    answers_s: np.ndarray
    codes: np.ndarray
    socket_errors: int
    max_latency_s: float

    @classmethod
    def read(cls, path: Path) -> WrkLog:
        data = json.loads(path.read_text())
        (thread,) = data["threads"]  # wrk -t1
        return cls(
            # the first request() call is wrk checking the script (wrk.c main, thread 0, before any connection)
            np.array(thread["sends"][1:], dtype=float) / 1e6,
            np.array(thread["answers"], dtype=float) / 1e6,
            np.array(thread["codes"], dtype=int),
            int(data["socket_errors"]),
            data["max_latency_us"] / 1e6,
        )

    @property
    def covered_until_s(self) -> float:
        """The last record: how far the run reached."""
        return float(np.max(np.concatenate([self.sends_s, self.answers_s])))


def wrk_stats(log: WrkLog, connections: int, start_s: float, end_s: float) -> WindowStats:
    """wrk's window by window_stats' rule: requests sent at or after `start_s` and answered by `end_s`.

    One connection: its sends and answers alternate, so they pair one to one and window_stats reads them like our
    log. More connections: answers are not tied to their sends, so the count is answers by the end minus sends
    before the start (each request sent before the start was answered by the end: none lost, none slower than the
    window), failures are the non-2xx answers in the window, and no latency is taken (nan).
    """
    unanswered = len(log.sends_s) - len(log.answers_s)
    if not 0 <= unanswered <= connections:
        raise RuntimeError(
            f"wrk's log does not pair: {len(log.sends_s)} sends and {len(log.answers_s)} answers "
            f"over {connections} connections"
        )
    ok = (log.codes >= 200) & (log.codes < 300)
    if connections == 1:
        sends = log.sends_s[: len(log.answers_s)]
        return window_stats(sends, np.round((log.answers_s - sends) * 1e6), ok, start_s, end_s)
    if log.socket_errors or log.max_latency_s >= end_s - start_s:
        raise RuntimeError(
            f"wrk: {log.socket_errors} socket errors, slowest answer {log.max_latency_s:.3f} s: requests may be lost "
            "or slower than the window, so its answers cannot be counted against its sends"
        )
    in_window = (log.answers_s >= start_s) & (log.answers_s <= end_s)
    requests = int(np.count_nonzero(log.answers_s <= end_s) - np.count_nonzero(log.sends_s < start_s))
    failures = int(np.count_nonzero(in_window & ~ok))
    nan = float("nan")
    return WindowStats((requests - failures) / (end_s - start_s), nan, nan, requests - failures, failures)


@dataclass(frozen=True)
class GeneratorRun:
    """One tool's run, over its window: successful requests per second, generator CPU and the server's CPU (cores
    used: CPU seconds in the window / its length), p50 (nan: not measured, wrk with more than one connection)."""

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
    endpoint: str, sampler: CpuSampler, bodies: list[dict], args: argparse.Namespace, work: Path, tool: Tool
) -> GeneratorRun:
    phase = Phase(initial_users=tool.users, spawn_rate=0, duration_seconds=args.warmup + args.duration + TAIL_S)
    wall_minus_monotonic = time.time() - time.monotonic()
    result = run_load(LoadRequest(endpoint, MODEL, bodies, [phase], work, workers=tool.workers, client=tool.client))
    log, timeline = result.requests, result.timeline
    start, end = log_window(tool.label, log.t_s, result.duration_s, args.warmup, args.duration)
    stats = window_stats(log.t_s, log.latency_us, log.ok, start, end)
    zero = result.started_at - wall_minus_monotonic  # the load clock's t_s = 0 on time.monotonic()
    return GeneratorRun(
        tool.label,
        stats.throughput,
        cpu_seconds(timeline.t_s, timeline.cpu_percent, start, end) / args.duration,
        sampler.cpu_between("server", zero + start, zero + end) / args.duration,
        stats.failures,
        stats.p50_ms,
    )


def run_wrk(sampler: CpuSampler, endpoint: str, work: Path, args: argparse.Namespace, tool: Tool) -> GeneratorRun:
    log_path = work / "wrk-log.json"
    log_path.unlink(missing_ok=True)
    command = [
        "wrk",
        "-t1",
        f"-c{tool.users}",
        f"-d{math.ceil(args.warmup + args.duration + TAIL_S)}s",  # wrk takes whole seconds
        "--timeout",
        "10s",
        "-s",
        str(work / "post.lua"),
        endpoint + kserve.infer_path(MODEL),
    ]
    env = {**os.environ, "BENCH_BODY": str(work / "body.json"), "BENCH_LOG": str(log_path)}
    run = run_tool(command, env=env, on_start=lambda pid: sampler.watch("wrk", pid))
    if run.returncode != 0 or not log_path.is_file():
        raise RuntimeError(
            f"wrk failed (exit {run.returncode}, log {'written' if log_path.is_file() else 'missing'}):\n{run.output}"
        )
    log = WrkLog.read(log_path)
    start, end = log_window(tool.label, log.sends_s, log.covered_until_s, args.warmup, args.duration)
    stats = wrk_stats(log, tool.users, start, end)
    return GeneratorRun(
        tool.label,
        stats.throughput,
        sampler.cpu_between("wrk", start, end) / args.duration,
        sampler.cpu_between("server", start, end) / args.duration,
        stats.failures + log.socket_errors,
        stats.p50_ms,
    )


def plan_tools(args: argparse.Namespace) -> list[Tool]:
    """Every client and wrk at --users; more workers with the first client; every client and wrk at 1 connection."""
    tools = [*(Tool(client, args.users) for client in args.clients), Tool("wrk", args.users)]
    tools += [Tool(args.clients[0], args.users, n) for n in args.workers if n > 1]
    return tools + ([*(Tool(client, 1) for client in args.clients), Tool("wrk", 1)] if args.latency else [])


def measure(args: argparse.Namespace, work: Path) -> dict[Tool, list[GeneratorRun]]:
    """Alternate the tools for --repeats rounds against one null endpoint; every run's figures per tool."""
    bodies = inference_bodies(PayloadSpec(sequence_length=args.sequence_length))[:1]  # one body: wrk sends one
    (work / "body.json").write_text(json.dumps(bodies[0]))
    (work / "post.lua").write_text(_LUA)
    tools = plan_tools(args)
    runs: dict[Tool, list[GeneratorRun]] = {tool: [] for tool in tools}
    endpoint_process = NullEndpoint()
    with endpoint_process as endpoint, CpuSampler() as sampler:
        sampler.watch("server", endpoint_process.process.pid)
        for repeat in range(args.repeats):
            for number, tool in enumerate(tools if repeat % 2 == 0 else tools[::-1]):
                if tool.client == "wrk":
                    run = run_wrk(sampler, endpoint, work, args, tool)
                else:
                    run = run_ours(endpoint, sampler, bodies, args, work / f"run-{repeat}-{number}", tool)
                runs[tool].append(run)
                p50 = "n/a" if math.isnan(run.p50_ms) else f"{run.p50_ms:.3f} ms"
                print(
                    f"  repeat {repeat + 1}/{args.repeats} {run.tool:40} {run.requests_per_s:9.0f} req/s  "
                    f"generator {run.generator_cores:.2f} cores  {run.per_core:9.0f} req/s/core  "
                    f"server {run.server_cores:.2f} cores  p50 {p50}  failures {run.failures}",
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
        "Added latency at concurrency 1 (our p50 minus wrk's p50 at -c1, medians over rounds; each p50 over the "
        "exact latencies of the requests sent and answered in the tool's window):",
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
        help="Seconds after each tool's first send left out of its window (default 2).",
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


def main(argv: list[str] | None = None) -> int:
    children.stop_on_sigterm()  # SIGTERM tears the server down like Ctrl-C does
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
    sys.exit(children.exit_interrupted(main))
