"""Padding as a variant (issue 36): MiniLM with `padding: max`, `buckets` and `none` x dynamic batching off/on, in
ONE `recommender run`, on a variable-length payload; MaxInvocations, tokens/s and p95 of each, and the recommendation
under the same limits.

    python benchmarks/padding.py            # MiniLM, 3000 generated texts (benchmarks/varlen_payload.py), 6 candidates
    python benchmarks/padding.py --quick    # smoke test: a tiny BERT, 200 texts, one short level

The payload is GENERATED from a stated length distribution (benchmarks/varlen_payload.py: log-normal, median 16
tokens, clipped to 4..128, words from the packaged vocabulary), not read from a corpus; the experiment sets no
`sequence_length`, so `max` pads every request to the payload's longest (128 tokens). tokens/s is MaxInvocations / 60
x the payload's mean UNPADDED tokens per request (the user's tokens served per second; what padding adds is compute,
not tokens); "sent" is the mean tokens per request on the wire under that padding.

The target (issue 36): the recommended configuration serves at least 2x the MaxInvocations of the best `padding: max`
candidate at the same p95 limit, or the table shows why not. The run is `recommender run FILE --fresh` in a
subprocess against its own SQLite database in the work folder (the real tritonserver, real Locust). Figures need a
quiet host; exits non-zero only on errors, never on a missed target.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import children  # noqa: E402  (benchmarks/, next to this script)
from varlen_payload import LengthDistribution, generated_texts, length_summary  # noqa: E402

from recommender.load.payload import padded_lengths, request_lengths  # noqa: E402
from recommender.spec import PayloadSpec  # noqa: E402

WORK_DIR = Path(__file__).resolve().parent / ".work" / "padding"
PADDINGS = ("max", "buckets", "none")
TARGET_RATIO = 2.0
MODELS = {
    "minilm": {"source": "minilm"},
    "bert-tiny": {"source": "bert", "architecture": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}},
}


def experiment(args: argparse.Namespace, payload_file: str) -> dict:
    return {
        "name": "padding",
        "description": "padding max / buckets / none x dynamic batching on a variable-length payload",
        "model": MODELS[args.model],
        "payload": {"file": payload_file},  # the user's path: a JSONL payload file, one {"text": ...} per request
        "variants": {
            "optimizations": ["pt"],
            "dynamic_batching": [False, {"max_queue_delay_microseconds": args.queue_delay_us}],
            "instance_group_counts": [1],
            "max_batch_sizes": [args.max_batch_size],
            "padding": list(PADDINGS),
        },
        "traffic": {
            "warmup_seconds": args.warmup,
            "window_seconds": args.window,
            "concurrency": {"users": args.users, "duration_seconds": args.level_seconds},
            "repeats": args.repeats,
        },
        "latency_threshold": {"percentile": "p95", "ms": args.p95_ms},
    }


def recommender(work: Path, *arguments: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "recommender", *arguments],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
        check=False,
    )


def table(decision: dict, payload: PayloadSpec) -> tuple[str, list[str]]:
    """The ranked candidates (MaxInvocations, tokens/s, p95, tokens sent per request) and the verdict lines."""
    lengths = request_lengths(payload)
    mean_tokens = sum(lengths) / len(lengths)
    sent = {p: sum(padded_lengths(payload, p)) / len(lengths) for p in PADDINGS}
    rows = [
        "| # | candidate | padding | dynamic batching | MaxInvocations/min | tokens/s | p95 ms "
        "| tokens sent per request |",
        "|---|---|---|---|---|---|---|---|",
    ]
    best: dict[str, float] = {}
    for r in decision["ranked"]:
        padding = r["config"].get("padding", "max")
        ipm = r["invocations_per_minute"] or 0.0
        best[padding] = max(best.get(padding, 0.0), ipm)
        batching = "on" if r["config"].get("dynamic_batching") else "off"
        rows.append(
            f"| {r['rank']} | {r['name']} | {padding} | {batching} | {ipm:,.0f} | {ipm / 60 * mean_tokens:,.0f} | "
            f"{r['latency_ms'] or float('nan'):.1f} | {sent[padding]:.1f} |"
        )
    rows += [f"| - | {e['name']} | | | excluded: {'; '.join(e['reasons'])} | | | |" for e in decision["excluded"]]
    recommended = decision["recommended"]
    verdicts = [
        f"recommended: {recommended or 'none'}" + (f" ({decision['no_winner_reason']})" if not recommended else "")
    ]
    winner = next((r for r in decision["ranked"] if r["name"] == recommended), None)
    if winner and best.get("max"):
        ratio = (winner["invocations_per_minute"] or 0.0) / best["max"]
        verdict = "PASS" if ratio >= TARGET_RATIO else "FAIL"
        verdicts.append(
            f"target: recommended >= {TARGET_RATIO:g}x the MaxInvocations of the best padding max candidate -> "
            f"{verdict} ({ratio:.2f}x; tokens sent per request: max {sent['max']:.1f}, buckets {sent['buckets']:.1f}, "
            f"none {sent['none']:.1f}, unpadded mean {mean_tokens:.1f})"
        )
    else:
        verdicts.append("target: not judged (no recommended candidate, or no padding max candidate ranked)")
    return "\n".join(rows), verdicts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--model", choices=sorted(MODELS), default="minilm", help="Served model (default minilm).")
    parser.add_argument("--texts", type=int, default=3000, help="Generated requests (default 3000).")
    parser.add_argument("--users", type=int, nargs="+", default=[1, 4, 8, 16], help="Concurrency levels.")
    parser.add_argument("--level-seconds", type=float, default=30.0, help="Seconds per level (default 30).")
    parser.add_argument("--warmup", type=float, default=3.0, help="Warm-up seconds per level (default 3).")
    parser.add_argument("--window", type=float, default=3.0, help="Window seconds (default 3).")
    parser.add_argument("--repeats", type=int, default=3, help="Repeats (default 3).")
    parser.add_argument("--p95-ms", type=float, default=500.0, help="p95 limit of the recommendation (default 500).")
    parser.add_argument("--max-batch-size", type=int, default=8, help="max_batch_size (default 8).")
    parser.add_argument("--queue-delay-us", type=int, default=2000, help="Dynamic batching queue delay (default 2000).")
    parser.add_argument("--quick", action="store_true", help="Smoke test: bert-tiny, 200 texts, 1 level of 4 s.")
    parser.add_argument("--work-dir", type=Path, default=WORK_DIR, help="Experiment file, database, run folders.")
    args = parser.parse_args(argv)
    if args.quick:
        args.model, args.texts, args.users, args.level_seconds, args.repeats = "bert-tiny", 200, [2], 4.0, 1
        args.warmup, args.window = 1.0, 1.0
    return args


def main(argv: list[str] | None = None) -> int:
    children.stop_on_sigterm()
    args = parse_args(argv)
    distribution = LengthDistribution(count=args.texts)
    texts = generated_texts(distribution)
    work = args.work_dir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    (work / "payload.jsonl").write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))
    payload = PayloadSpec(file=work / "payload.jsonl")
    path = work / "padding.yaml"
    path.write_text(yaml.safe_dump(experiment(args, "payload.jsonl"), sort_keys=False))
    print(f"padding benchmark: {args.model}; payload: {distribution.describe()}", flush=True)
    print(f"  {length_summary(payload)}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}", flush=True)
    print(f"  command: recommender run {path} --fresh  (in {work})", flush=True)
    done = recommender(work, "run", str(path), "--fresh", timeout=6 * 3600)
    if done.returncode != 0:
        print(done.stdout[-3000:] + done.stderr[-3000:], file=sys.stderr)
        print(f"error: recommender run exited {done.returncode}", file=sys.stderr)
        return 1
    ranked = recommender(work, "rank", "padding", "--json", timeout=600)
    if ranked.returncode != 0:
        print(ranked.stderr[-3000:], file=sys.stderr)
        return 1
    rows, verdicts = table(json.loads(ranked.stdout), payload)
    print()
    print(rows)
    print()
    print("\n".join(verdicts))
    print(f"\nload average at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(children.exit_interrupted(main))
