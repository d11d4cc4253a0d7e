"""Load-driver fidelity: one real Triton model measured by NVIDIA's perf_analyzer and by this platform's load driver.

Each model (packaged all-MiniLM-L6-v2 and a tiny random-weight BERT, 2 layers x 128, by default) is exported to
TorchScript and served by the local target (tritonserver from the nvidia-pytriton wheel): optimization pt, dynamic
batching off, 1 instance. At each concurrency (default 1 4 8 16 32) both tools send the same tokenized KServe v2 JSON
requests (same sequence length, same texts in turn), closed loop, over HTTP. The tools alternate (perf_analyzer first
in odd rounds, ours first in even rounds) and the rounds repeat; the tables show medians over the rounds, spreads
(min..max) and ratios.

Both tools run for at least warm-up + 3 x interval + 1 s and both are scored by the SAME rule on their exact
per-request logs, each on its own clock from its own first send: the window is [first send + `--warmup`, + 3 x
interval]; requests sent in it and completed by its end count; throughput = successful ones / window length, p50/p95
from their exact latencies. A run whose log stops before its window's end (perf_analyzer's last measurement window,
our run's end) is refused: printed as "no result: refused ...", never divided by a window it did not cover.

- perf_analyzer: `--concurrency-range N:N -p <(warm-up + window + 1 s)/3> --stability-percentage 1000
  --percentile=95 --input-data <json> --input-tensor-format=json --output-tensor-format=json -f <csv>
  --profile-export-file <json>`; its client-side per-request send and response timestamps come from the profile
  export. (With its own stability gate, `--stability 10`, a shared noisy host makes it give up after --max-trials
  windows; its own CSV figures are printed per round for reference.)
- ours: run_load with one level of N users (spawn rate 0) lasting warm-up + 3 x interval + 1 s; the exact
  RequestLog.
- open loop (--rate-shares, default 0.5 and 0.8 of perf_analyzer's highest closed-loop throughput for that model):
  perf_analyzer `--request-rate-range R:R --request-distribution constant --max-threads 16`; ours `traffic.rate`
  (constant spacing, at most 16 in flight). Both timed from the ACTUAL send (ours: scheduled send + its lateness),
  perf_analyzer's definition; our own figure, timed from the scheduled send, is printed in the round's note.

The verdict compares the two medians; the paired column is the median of per-round ratios (back-to-back runs share
the host's drift). The Triton compute_infer row (server statistics, ms per inference during each tool's run) tells
a slower server (other tenants, or the generator's own CPU on a small host) from a slower client.

Targets per level: throughput within +-5 %, p50 and p95 within +-10 % or +-1 ms of perf_analyzer. Verdicts
are printed; the exit code is non-zero only on errors (missing tools, a server that does not start).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

import children
import numpy as np
from measurement import (
    TAIL_S,
    ShortRun,
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
from perf_analyzer_tool import PerfAnalyzer, ToolMissing, ensure_perf_analyzer, input_data_file

use_this_checkout()

from recommender.candidates import Candidate, model_fingerprint  # noqa: E402
from recommender.load.payload import inference_bodies  # noqa: E402
from recommender.load.runner import LoadRequest, run_load  # noqa: E402
from recommender.load.shapes import TrafficPlan, compile_traffic  # noqa: E402
from recommender.modelrepo.export import export_model  # noqa: E402
from recommender.modelrepo.repository import write_model_repository  # noqa: E402
from recommender.spec import BertArchitecture, ExperimentSpec, ModelSpec, PayloadSpec  # noqa: E402
from recommender.spec.traffic import Concurrency, Rate, TrafficSpec  # noqa: E402
from recommender.targets.local import LocalDeployment, LocalTarget  # noqa: E402

MODEL_NAME = "model"
WORK_DIR = Path(__file__).resolve().parent / ".work"
MODELS = {
    "minilm": ModelSpec(source="minilm"),
    "bert-tiny": ModelSpec(source="bert", architecture=BertArchitecture(layers=2, hidden=128, heads=2)),
}
OPEN_LOOP_SLOTS = 16  # open loop: our in-flight limit (traffic.rate.max_concurrency) and perf_analyzer's --max-threads
THROUGHPUT_TOLERANCE = 0.05
LATENCY_TOLERANCE, LATENCY_FLOOR_MS = 0.10, 1.0


@dataclass(frozen=True)
class Load:
    """One load level: closed loop at `value` users, or open loop at `value` requests/s (constant spacing)."""

    open_loop: bool
    value: int

    @property
    def label(self) -> str:
        return f"open loop {self.value} req/s" if self.open_loop else f"c={self.value}"

    @property
    def stem(self) -> str:
        return f"r{self.value}" if self.open_loop else f"c{self.value}"

    def perf_analyzer_arguments(self) -> list[str]:
        if self.open_loop:
            return [
                "--request-rate-range",
                f"{self.value}:{self.value}",
                "--request-distribution",
                "constant",
                "--max-threads",
                str(OPEN_LOOP_SLOTS),
            ]
        return ["--concurrency-range", f"{self.value}:{self.value}"]

    def plan(self, seconds: float) -> TrafficPlan:
        if self.open_loop:
            rate = Rate(requests_per_second=self.value, duration_seconds=seconds, max_concurrency=OPEN_LOOP_SLOTS)
            return compile_traffic(TrafficSpec(rate=rate))
        return compile_traffic(TrafficSpec(concurrency=Concurrency(users=[self.value], duration_seconds=seconds)))


@dataclass(frozen=True)
class Measurement:
    """One tool at one concurrency in one round (`stats` None when the tool gave no stable measurement)."""

    tool: str
    load: Load
    stats: WindowStats | None
    generator_cores: float  # the tool's own CPU, in cores, over its run
    server_compute_ms: float  # Triton's mean compute_infer time per inference over the run
    note: str = ""


def build_repository(model: str, sequence_length: int, threads: int, work: Path) -> Path:
    spec = ExperimentSpec(name="fidelity", model=MODELS[model], payload=PayloadSpec(sequence_length=sequence_length))
    artifact = export_model(spec.model, "pt", sequence_length, model_fingerprint(spec), work / "exports")
    candidate = Candidate("pt", None, 1, 8, "local")
    root = work / f"repo-{model}-{sequence_length}"
    shutil.rmtree(root, ignore_errors=True)
    return write_model_repository(candidate, artifact, root, MODEL_NAME, threads_per_instance=threads)


def warm_up(deployment: LocalDeployment, bodies: list[dict], count: int = 30) -> None:
    for i in range(count):
        deployment.probe(bodies[i % len(bodies)], timeout_s=60)


def compute_ms(deployment: LocalDeployment) -> tuple[int, int]:
    """(inference count, total compute_infer ns) so far, from Triton's statistics."""
    stats = deployment.statistics()["model_stats"][0]["inference_stats"]["compute_infer"]
    return int(stats["count"]), int(stats["ns"])


def mean_compute_ms(before: tuple[int, int], after: tuple[int, int]) -> float:
    count = after[0] - before[0]
    return (after[1] - before[1]) / count / 1e6 if count else float("nan")


def run_perf_analyzer(
    tool: PerfAnalyzer, deployment: LocalDeployment, load: Load, data: Path, args: argparse.Namespace, work: Path
) -> Measurement:
    """perf_analyzer for warm-up + 3 intervals; its exported per-request timestamps go through our window rule."""
    csv_path, profile_path = work / f"pa-{load.stem}.csv", work / f"pa-{load.stem}.profile.json"
    for stale in (csv_path, profile_path):
        stale.unlink(missing_ok=True)
    window_s = 3 * args.interval_ms / 1000.0
    pass_ms = math.ceil((args.warmup + window_s + TAIL_S) * 1000.0 / 3)  # its 3 passes (the fewest) cover the window
    command = [
        str(tool.binary),
        "-m",
        MODEL_NAME,
        "-u",
        deployment.endpoint.removeprefix("http://"),
        "-i",
        "http",
        *load.perf_analyzer_arguments(),
        "-p",
        str(pass_ms),
        "--stability-percentage",
        str(args.stability),
        "--max-trials",
        str(args.max_trials),
        "--percentile=95",
        "--input-data",
        str(data),
        "--input-tensor-format=json",
        "--output-tensor-format=json",
        "-f",
        str(csv_path),
        "--profile-export-file",
        str(profile_path),
        "-v",
    ]
    before = compute_ms(deployment)
    run = run_tool(command, env=tool.env())
    text = run.output
    (work / f"pa-{load.stem}.log").write_text(text)
    server = mean_compute_ms(before, compute_ms(deployment))
    cores = run.cpu_s / run.wall_s
    if run.returncode != 0 or not profile_path.is_file() or not csv_path.is_file():
        reason = next(
            (line.strip() for line in text.splitlines() if "stable" in line.lower() or "error" in line.lower()),
            text.strip()[-200:],
        )
        return Measurement("perf_analyzer", load, None, cores, server, f"no result: {reason}")
    t_s, latency_us, ok, covered_s = _profile_log(profile_path)
    try:
        start, end = log_window("perf_analyzer", t_s, covered_s, args.warmup, window_s)
    except ShortRun as short:
        return Measurement("perf_analyzer", load, None, cores, server, f"no result: refused: {short}")
    own = next(csv.DictReader(csv_path.open()))
    note = (
        f"pa's own report over its {covered_s:.1f} s: {float(own['Inferences/Second']):.1f} inf/s p50 "
        f"{float(own['p50 latency']) / 1000:.2f} p95 {float(own['p95 latency']) / 1000:.2f} ms"
    )
    return Measurement("perf_analyzer", load, window_stats(t_s, latency_us, ok, start, end), cores, server, note)


def _profile_log(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """perf_analyzer's --profile-export-file as our log: send time from its first send (s), latency (us), ok, and how
    far its run reached from its first send (s): its last measurement window's end or its last response."""
    experiment = json.loads(path.read_text())["experiments"][0]
    requests = experiment["requests"]
    sent = np.array([r["timestamp"] for r in requests], dtype=np.int64)
    done = np.array([(r["response_timestamps"] or [0])[-1] for r in requests], dtype=np.int64)
    ok = np.array([bool(r["response_timestamps"]) for r in requests])
    t0 = int(sent.min())
    covered_s = (max(experiment["window_boundaries"][-1], int(done.max())) - t0) / 1e9
    return (sent - t0) / 1e9, np.where(ok, (done - sent) // 1000, 0), ok, covered_s


def run_ours(
    deployment: LocalDeployment, load: Load, bodies: list[dict], args: argparse.Namespace, work: Path
) -> Measurement:
    """Open loop: timed from the actual send like perf_analyzer (send = scheduled + late); our own figure (from the
    scheduled send) is in the note."""
    window_s = 3 * args.interval_ms / 1000.0
    plan = load.plan(args.warmup + window_s + TAIL_S)
    before = compute_ms(deployment)
    result = run_load(LoadRequest(deployment.endpoint, MODEL_NAME, bodies, plan, work / f"ours-{load.stem}"))
    server = mean_compute_ms(before, compute_ms(deployment))
    log, timeline = result.requests, result.timeline
    late_us = log.late_us if log.late_us is not None else np.zeros_like(log.latency_us)
    sent_s = log.t_s + late_us / 1e6
    try:
        start, end = log_window("ours", sent_s, result.duration_s, args.warmup, window_s)
    except ShortRun as short:
        return Measurement("ours", load, None, float("nan"), server, f"no result: refused: {short}")
    stats = window_stats(sent_s, log.latency_us - late_us, log.ok, start, end)
    cores = cpu_seconds(timeline.t_s, timeline.cpu_percent, start, end) / window_s
    note = f"{stats.failures} failures " if stats.failures else ""
    if load.open_loop:
        scheduled = window_stats(log.t_s, log.latency_us, log.ok, start, end)
        late = float(np.median(late_us)) / 1000 if len(late_us) else 0.0
        note += (
            f"from the scheduled send: p50 {scheduled.p50_ms:.2f} p95 {scheduled.p95_ms:.2f} ms; "
            f"median late {late:.3f} ms"
        )
    return Measurement("ours", load, stats, cores, server, note)


def measure(
    tool: PerfAnalyzer,
    deployment: LocalDeployment,
    bodies: list[dict],
    loads: list[Load],
    args: argparse.Namespace,
    work: Path,
) -> list[Measurement]:
    data = input_data_file(bodies, work / "input-data.json")
    measurements = []
    for repeat in range(args.repeats):
        for load in loads:
            order = ("perf_analyzer", "ours") if repeat % 2 == 0 else ("ours", "perf_analyzer")
            for name in order:
                if name == "ours":
                    m = run_ours(deployment, load, bodies, args, work / f"round{repeat}")
                else:
                    m = run_perf_analyzer(tool, deployment, load, data, args, _mkdir(work / f"round{repeat}"))
                measurements.append(m)
                s = m.stats
                figures = (
                    f"{s.throughput:8.1f} inf/s  p50 {s.p50_ms:7.2f} ms  p95 {s.p95_ms:7.2f} ms"
                    if s
                    else "no stable measurement"
                )
                print(
                    f"  round {repeat + 1}/{args.repeats}  {load.label:<22} {m.tool:13} {figures}  "
                    f"generator {m.generator_cores:.2f} cores  "
                    f"server compute {m.server_compute_ms:.2f} ms  {m.note}",
                    flush=True,
                )
    return measurements


def open_loop_rates(closed: list[Measurement], shares: list[float]) -> list[Load]:
    """Open-loop levels at these shares of the highest closed-loop throughput perf_analyzer measured (median over
    rounds)."""
    peaks = [
        summarise(
            [m.stats.throughput for m in closed if m.load == load and m.tool == "perf_analyzer" and m.stats]
        ).median
        for load in {m.load for m in closed if m.tool == "perf_analyzer" and m.stats}
    ]
    return [Load(True, max(1, round(share * max(peaks)))) for share in shares] if peaks else []


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _paired(theirs: list[Measurement], ours: list[Measurement]) -> list[tuple[Measurement, Measurement]]:
    """(perf_analyzer, ours) of the same round, both with a result: back-to-back runs share the host's noise best."""
    return [(p, o) for p, o in zip(theirs, ours, strict=True) if p.stats and o.stats]


def _within(ours: float, theirs: float, tolerance: float, floor: float = 0.0) -> bool:
    return abs(ours - theirs) <= max(tolerance * theirs, floor)


def report(measurements: list[Measurement], args: argparse.Namespace) -> str:
    sections = []
    for load in dict.fromkeys(m.load for m in measurements):
        by_tool = {
            tool: [m for m in measurements if m.load == load and m.tool == tool] for tool in ("perf_analyzer", "ours")
        }
        stable = {tool: [m.stats for m in items if m.stats] for tool, items in by_tool.items()}
        if not stable["perf_analyzer"] or not stable["ours"]:
            sections.append(f"### {load.label}\n\nno comparison: a tool gave no stable measurement in any round")
            continue
        pairs = _paired(by_tool["perf_analyzer"], by_tool["ours"])
        rows = []
        for label, name, tolerance, floor in (
            ("throughput (inf/s)", "throughput", THROUGHPUT_TOLERANCE, 0.0),
            ("p50 (ms)", "p50_ms", LATENCY_TOLERANCE, LATENCY_FLOOR_MS),
            ("p95 (ms)", "p95_ms", LATENCY_TOLERANCE, LATENCY_FLOOR_MS),
        ):
            theirs = summarise([getattr(s, name) for s in stable["perf_analyzer"]])
            ours = summarise([getattr(s, name) for s in stable["ours"]])
            paired = summarise([ratio(getattr(o.stats, name), getattr(p.stats, name)) for p, o in pairs])
            target = f"+-{tolerance:.0%}" + (f" or +-{floor:g} ms" if floor else "")
            verdict = "PASS" if _within(ours.median, theirs.median, tolerance, floor) else "FAIL"
            rows.append(
                [
                    label,
                    theirs.median,
                    theirs.spread,
                    ours.median,
                    ours.spread,
                    f"{ratio(ours.median, theirs.median):.3f}",
                    f"{paired.median:.3f} ({paired.spread})",
                    target,
                    verdict,
                ]
            )
        compute = [summarise([m.server_compute_ms for m in items]) for items in by_tool.values()]
        paired = summarise([ratio(o.server_compute_ms, p.server_compute_ms) for p, o in pairs])
        rows.append(
            [
                "Triton compute_infer (ms)",
                compute[0].median,
                compute[0].spread,
                compute[1].median,
                compute[1].spread,
                f"{ratio(compute[1].median, compute[0].median):.3f}",
                f"{paired.median:.3f} ({paired.spread})",
                "(diagnostic)",
                "",
            ]
        )
        extra = [
            [tool, f"{len(stable[tool])}/{len(items)}", f"{summarise([m.generator_cores for m in items]).median:.2f}"]
            for tool, items in by_tool.items()
        ]
        sections.append(
            f"### {load.label}\n\n"
            + render_table(
                [
                    "metric",
                    "perf_analyzer (median)",
                    "pa spread",
                    "ours (median)",
                    "ours spread",
                    "ours/pa (medians)",
                    "ours/pa paired by round: median (min..max)",
                    "target",
                    "verdict",
                ],
                rows,
            )
            + "\n\n"
            + render_table(["tool", "rounds with a result", "generator CPU (cores, median)"], extra)
        )
    return "\n\n".join(sections)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--models",
        choices=sorted(MODELS),
        nargs="+",
        default=["minilm", "bert-tiny"],
        help="Served models, one after another (default minilm (real weights) bert-tiny (2 layers, 128 wide)).",
    )
    parser.add_argument("--sequence-length", type=int, default=32, help="Tokens per request (default 32).")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="Intra-op threads of the model instance (default 1: on a shared 2-core host, 2 threads make every "
        "operator wait at a barrier for a descheduled thread and latencies explode).",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        nargs="+",
        default=[1, 4, 8, 16, 32],
        help="Concurrency levels (default 1 4 8 16 32).",
    )
    parser.add_argument(
        "--rate-shares",
        type=float,
        nargs="*",
        default=[0.5, 0.8],
        help="Open-loop levels at these shares of perf_analyzer's highest closed-loop throughput (default 0.5 0.8; "
        "none: no open-loop comparison).",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="Rounds; the tool order alternates per round (default 5)."
    )
    parser.add_argument(
        "--interval-ms", type=int, default=2000, help="Window = 3 x this (default 2000 ms: short runs, more rounds)."
    )
    parser.add_argument(
        "--warmup", type=float, default=None, help="Seconds our runs exclude at the start (default: one interval)."
    )
    parser.add_argument(
        "--stability",
        type=float,
        default=1000.0,
        help="perf_analyzer --stability-percentage (default 1000: no stability gate, so it makes exactly 3 passes "
        "covering warm-up + window; with 10, a shared noisy host makes it give up after --max-trials).",
    )
    parser.add_argument("--max-trials", type=int, default=10, help="perf_analyzer --max-trials (default 10).")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="Smoke test: bert-tiny, concurrency 1 and 4, open loop at 0.5, 1 round, 1 s interval.",
    )
    parser.add_argument(
        "--no-download", action="store_true", help="Do not download the perf_analyzer wheels; only say what is missing."
    )
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=WORK_DIR / "fidelity",
        help="Exports, repository, logs (default benchmarks/.work/fidelity).",
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.concurrency, args.rate_shares, args.repeats, args.interval_ms = (
            ["bert-tiny"],
            [1, 4],
            [0.5],
            1,
            1000,
        )
    if args.warmup is None:
        args.warmup = args.interval_ms / 1000.0
    return args


def main(argv: list[str] | None = None) -> int:
    children.stop_on_sigterm()  # SIGTERM tears the server down like Ctrl-C does
    args = parse_args(argv)
    try:
        tool = ensure_perf_analyzer(download=not args.no_download)
    except ToolMissing as missing:
        print(f"error: perf_analyzer is not set up: {missing}", file=sys.stderr)
        return 2
    work = _mkdir(args.work_dir.resolve())
    bodies = inference_bodies(PayloadSpec(sequence_length=args.sequence_length))
    print(
        f"fidelity benchmark: {tool.version()}; models {' '.join(args.models)}, "
        f"sequence length {args.sequence_length}, "
        f"{len(bodies)} request bodies in turn; pt, no dynamic batching, 1 instance x {args.threads} thread(s); "
        f"concurrency {args.concurrency}, open loop at {args.rate_shares} of the closed-loop peak; "
        f"{args.repeats} rounds; "
        f"window 3 x {args.interval_ms} ms after {args.warmup:g} s warm-up; {os.cpu_count()} CPUs, "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    reports = [
        f"## {model}\n\n{report(measure_model(tool, model, bodies, args, _mkdir(work / model)), args)}"
        for model in args.models
    ]
    print()
    print("\n\n".join(reports))
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


def measure_model(
    tool: PerfAnalyzer, model: str, bodies: list[dict], args: argparse.Namespace, work: Path
) -> list[Measurement]:
    """One model on its own server: the closed-loop levels, then open-loop levels derived from them."""
    repository = build_repository(model, args.sequence_length, args.threads, work)
    print(f"model {model}:", flush=True)
    with LocalTarget().deploy(repository, MODEL_NAME, work / "server") as deployment:
        warm_up(deployment, bodies)
        closed = measure(tool, deployment, bodies, [Load(False, c) for c in args.concurrency], args, work)
        return closed + measure(tool, deployment, bodies, open_loop_rates(closed, args.rate_shares), args, work)


if __name__ == "__main__":
    sys.exit(children.exit_interrupted(main))
