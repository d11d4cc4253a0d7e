"""Load-generator cost per streamed token: the Locust child's CPU per 1,000 output tokens/s at 8 concurrent streams.

The child (locustfile.RawInferenceUser reading server-sent events one at a time, load/token_stream.py) streams chat
generations from the null endpoint's generative mode (load/null_stream.py) on loopback, closed loop, --streams users.
Each generation is --tokens tokens, one per chunk, the first after --first-token-ms and each next after a delay set so
that the streams together offer the rate asked (--rates, output tokens/s: delay = streams * 1000 / rate ms).

Scored on the child's own records and CPU samples, as benchmarks/generator.py scores ours: the window is [first send
+ --warmup, + --duration]; a request counts when sent in the window and answered by its end; tokens/s = their output
tokens / the window's length; CPU = the generator's CPU seconds in the window (Timeline.cpu_percent) / its length;
cost = cores / (tokens/s / 1,000). Keeping up: the median inter-token latency (AIPerf's: (end-to-end - TTFT) /
(tokens - 1)) against the stand-in's delay, and the share of chunk gaps under metrics/selfcheck.py's BUNCHED_US (chunks
read back to back: the reader was behind). The rounds repeat (--repeats); the table shows medians and min..max.

Target (issue 39): at most CORES_PER_KTOKENS (0.1) core per 1,000 tokens/s at 8 streams, printed PASS/FAIL per rate;
the exit code is non-zero only on errors. The stand-in shares the host: on a 2-core host it takes a core of its own,
so run it on a quiet host for figures. `python benchmarks/generator_stream.py --help` for the options.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
from measurement import ShortRun, cpu_seconds, log_window, render_table, summarise, use_this_checkout

use_this_checkout()

from recommender.load.null_endpoint import NullEndpoint  # noqa: E402
from recommender.load.null_stream import GenerationBehaviour  # noqa: E402
from recommender.load.runner import LoadRequest, LoadResult, run_load  # noqa: E402
from recommender.metrics.selfcheck import BUNCHED_US, CORES_PER_KTOKENS  # noqa: E402
from recommender.spec import Phase  # noqa: E402
from recommender.targets.wire import OPENAI_CHAT, generation_body, openai  # noqa: E402

MODEL = "null"
TAIL_S = 1.0


def one_run(rate: float, args: argparse.Namespace, folder: Path) -> dict[str, float]:
    """One round at `rate` output tokens/s offered: the figures of its window."""
    delay_ms = args.streams * 1000.0 / rate
    behaviour = GenerationBehaviour(tokens=args.tokens, first_token_ms=args.first_token_ms, token_delay_ms=delay_ms)
    wire = openai("/v1", OPENAI_CHAT)
    bodies = [generation_body(wire, MODEL, "a prompt of a few words", args.tokens)]
    seconds = int(np.ceil(args.warmup + args.duration + TAIL_S))
    with NullEndpoint(generation=behaviour) as url:
        request = LoadRequest(
            url,
            MODEL,
            bodies,
            [Phase(initial_users=args.streams, spawn_rate=0, duration_seconds=seconds)],
            folder,
            path=wire.path(MODEL),
            answer_key=wire.answer_key,
            wire=wire.name,
        )
        result = run_load(request)
    return score(result, args.warmup, args.duration, delay_ms)


def score(result: LoadResult, warmup: float, duration: float, delay_ms: float) -> dict[str, float]:
    log, timeline = result.requests, result.timeline
    start, end = log_window("ours", log.t_s, result.duration_s, warmup, duration)
    done = log.t_s + log.latency_us / 1e6
    rows = log.rows((log.t_s >= start) & (done <= end))
    assert rows.output_tokens is not None and rows.ttft_us is not None  # a generative log
    good = rows.ok
    tokens_per_s = float(rows.output_tokens[good].sum()) / (end - start)
    cores = cpu_seconds(timeline.t_s, timeline.cpu_percent, start, end) / (end - start)
    itl = (rows.latency_us[good] - rows.ttft_us[good]) / np.maximum(rows.output_tokens[good] - 1, 1) / 1000
    gaps = np.concatenate([np.diff(rows.chunk_times_us(i)) for i in range(len(rows))] or [np.empty(0)])
    return {
        "tokens_per_s": tokens_per_s,
        "cores": cores,
        "per_k": cores / (tokens_per_s / 1000) if tokens_per_s else float("inf"),
        "itl_ms": float(np.median(itl)) if len(itl) else float("nan"),
        "delay_ms": delay_ms,
        "bunched": float(np.mean(gaps < BUNCHED_US)) if len(gaps) else float("nan"),
        "failures": float(np.count_nonzero(~rows.ok)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=8, help="Concurrent streams (Locust users); default 8.")
    parser.add_argument("--rates", default="1000,2000,4000", help="Output tokens/s offered, comma-separated.")
    parser.add_argument("--tokens", type=int, default=64, help="Tokens per generation (one per chunk).")
    parser.add_argument("--first-token-ms", type=float, default=5.0, help="The stand-in's delay to the first token.")
    parser.add_argument("--warmup", type=float, default=2.0, help="Seconds before the window.")
    parser.add_argument("--duration", type=float, default=10.0, help="The window's seconds.")
    parser.add_argument("--repeats", type=int, default=3, help="Rounds per rate.")
    parser.add_argument("--quick", action="store_true", help="Smoke test: one short round at 1,000 tokens/s.")
    args = parser.parse_args(argv)
    if args.quick:
        args.rates, args.warmup, args.duration, args.repeats, args.tokens = "1000", 1.0, 2.0, 1, 16
    rates = [float(rate) for rate in args.rates.split(",")]
    figures: dict[float, list[dict[str, float]]] = {rate: [] for rate in rates}
    with tempfile.TemporaryDirectory(prefix="generator-stream-") as tmp:
        for round_ in range(args.repeats):
            for rate in rates:
                try:
                    figures[rate].append(one_run(rate, args, Path(tmp) / f"r{round_}-{rate:g}"))
                except ShortRun as short:
                    print(f"refused: {short}", file=sys.stderr)
                    return 1
    headers = ["offered tokens/s", "tokens/s", "generator cores", "cores per 1,000 tokens/s", "ITL ms (set)"]
    headers += ["chunk gaps < 100 us", "failed"]
    table = []
    for rate, runs in figures.items():
        column = {name: summarise([run[name] for run in runs]) for name in runs[0]}
        table.append(
            [
                f"{rate:,.0f}",
                f"{column['tokens_per_s'].median:,.0f} ({column['tokens_per_s'].spread})",
                f"{column['cores'].median:.3f} ({column['cores'].spread})",
                f"{column['per_k'].median:.3f} ({column['per_k'].spread})",
                f"{column['itl_ms'].median:.2f} ({runs[0]['delay_ms']:.2f})",
                f"{column['bunched'].median:.1%}",
                f"{sum(run['failures'] for run in runs):.0f}",
            ]
        )
    print(f"{args.streams} streams, {args.tokens} tokens each, {args.repeats} round(s), window {args.duration:g} s")
    print(render_table(headers, table))
    for rate, runs in figures.items():
        cost = summarise([run["per_k"] for run in runs]).median
        verdict = "PASS" if cost <= CORES_PER_KTOKENS else "FAIL"
        print(
            f"target: <= {CORES_PER_KTOKENS:g} core per 1,000 tokens/s at {rate:,.0f} tokens/s -> {verdict} "
            f"(median {cost:.3f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
