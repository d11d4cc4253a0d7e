"""Searching a generative stack: the grid against adaptive search on experiments/llm.yaml's space, and AIPerf's own
search of the load on the grid's best and on adaptive's pick (issue 40's benchmark).

    python benchmarks/llm_search.py --out llm_search.md     # experiments/llm.yaml as it is: 13 vLLM, 9 llama.cpp
    python benchmarks/llm_search.py --runs 3                # 3 runs of each strategy, alternating
    python benchmarks/llm_search.py --quick                 # smoke test: 4 candidates, 2 short levels, 1 run
    python benchmarks/llm_search.py --no-aiperf             # without AIPerf's search

Each run is `recommender run FILE --fresh` in a subprocess against its own fresh SQLite database (the real vLLM
server or llama-server per candidate, real Locust; benchmarks/search.py `run_once`), the file experiments/llm.yaml with
`search.strategy` set to grid or to adaptive, the two alternating. Per run pair it prints both wall times and their
ratio (target: adaptive <= 0.3 x the grid) and adaptive's pick against the grid's best. The objective is the one
both strategies rank on: goodput per instance-hour under the SLOs (`Headline.objective`: requests within every SLO
per minute, at the highest concurrency level meeting them); the pick is the candidate measured in full with the
highest.

Whether adaptive's pick is the grid's best or tied with it is judged in ONE paired run (benchmarks/paired.py: between
runs the same configuration drifts more than configurations differ): the grid's best, adaptive's pick and the
engine's default (the grid best's engine's: `vllm-default` or `llamacpp-default`, always candidates) are each
measured `--paired-rounds` times (default 5), once per round in an order that alternates, each measurement a
`recommender run --fresh` of an experiment with that one engine configuration (its target alone, its settings as
single values) and 1 repeat; a pick is judged against the grid's best by the per-round differences of goodput/min:
tied when their mean's 95 % interval contains 0. The default's row is the issue's second target (the recommended
configuration's goodput at least 1.5x the default's under the same SLOs), printed as the ratio of their means over
the rounds that measured both; the generation gate's verdict on every candidate of the grid's run follows.

AIPerf's own search (`.venvs/aiperf`, 0.13): `aiperf profile --search-recipe max-concurrency-under-sla
--search-style monotonic` (its exponential probe and bisection of concurrency; `--concurrency-max` the experiment's
highest level) under the same TTFT and ITL thresholds (AIPerf's recipe reads TTFT at p95 and ITL at p95), on a
server started with the grid's best engine settings, then with adaptive's pick's: vLLM through
benchmarks/vllm_endpoint.py `vllm_server` (the flags targets/vllm.engine_flags makes, the same model folder
modelrepo/llama.py builds, with the fixed --max-model-len of that helper), llama.cpp through the product's own
llamacpp target (the candidate's settings, its GGUF file): its highest concurrency meeting them, its iterations and
its wall time. It tunes the load of a server already configured; the rows show what tuning the server adds beyond
that. A failed AIPerf search is recorded with its error and the benchmark goes on.

Run on a quiet host (the figures of a shared one are not the strategies'). Exits non-zero only on errors of our own
runs, never on a missed target or a peer's failure.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import children  # noqa: E402  (benchmarks/, next to this script)
import paired  # noqa: E402
from search import RunFailed, _one_line, decided, finished_run, run_once  # noqa: E402
from vllm_endpoint import VLLM_PYTHON, vllm_server  # noqa: E402

from recommender.candidates import LLAMACPP  # noqa: E402
from recommender.correctness.figures import describe  # noqa: E402
from recommender.modelrepo.llama import llama_folder  # noqa: E402
from recommender.spec import load_spec  # noqa: E402
from recommender.spec.llamacpp import DEFAULT as LLAMACPP_DEFAULT  # noqa: E402
from recommender.spec.llamacpp import LlamaCppSettings  # noqa: E402
from recommender.targets.llamacpp import LlamaCppTarget  # noqa: E402
from recommender.targets.vllm import engine_flags, known_flags  # noqa: E402

EXPERIMENT = ROOT / "experiments" / "llm.yaml"
AIPERF = ROOT / ".venvs" / "aiperf" / "bin" / "aiperf"
SERVED = "llm"
ENGINE_EXTRA = ("protocol", "variant", "kv_cache_gib")  # in a vLLM candidate's engine JSON, not engine arguments
# the smoke test: experiments/llm.yaml with a smaller model, 4 candidates (vLLM: 2 settings and the default;
# llama.cpp: one), 2 short levels
QUICK = {
    "model": {"source": "llama", "architecture": {"layers": 1, "hidden": 64, "heads": 2}},
    "payload": {"generation": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}, "count": 8}},
    "engine_args": {"max_num_seqs": [2, 4]},
    "llamacpp": {"gguf_types": ["f32"], "parallel": [2], "threads": [1]},
    "traffic": {"warmup_seconds": 1, "window_seconds": 2, "repeats": 1},
    "users": [1, 4],
    "seconds": 5,
}
GRID_BEST, ADAPTIVE, DEFAULT = "grid best", "adaptive pick", "engine default"


def targets(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The experiment's targets (`targets:`, or its one `target:`)."""
    return list(spec["targets"]) if "targets" in spec else [spec["target"]]


def experiment(base: Mapping[str, Any], quick: bool) -> dict[str, Any]:
    """experiments/llm.yaml as the benchmark runs it (the smoke test's smaller version with --quick)."""
    spec = copy.deepcopy(dict(base))
    spec.get("search", {}).pop("budget", None)  # the benchmark compares strategies, not budgets
    spec["decision"] = {"max_extra_seconds": 0}  # timed on their search alone: no tie-break of the leaders after it
    if quick:
        spec["model"] = QUICK["model"]
        spec["payload"] = QUICK["payload"]
        for target in targets(spec):
            if target["kind"] == "vllm":
                target["engine_args"] = QUICK["engine_args"]
            elif target["kind"] == "llamacpp":
                target["llamacpp"] = QUICK["llamacpp"]
        spec["traffic"] |= QUICK["traffic"]
        spec["traffic"]["concurrency"] = {"users": QUICK["users"], "duration_seconds": QUICK["seconds"]}
        spec["search"]["racing"] = {"final_repeats": 2, "eta": 3, "probe_seconds": 2}
    return spec


def write(folder: Path, spec: Mapping[str, Any], name: str, **changes: Any) -> Path:
    """The experiment with `changes` (search strategy, one candidate's configuration: its target alone with its
    settings as single values, repeats) as FILE.yaml in `folder`."""
    written = copy.deepcopy(dict(spec)) | {"name": name}
    if "strategy" in changes:
        written["search"] = written.get("search", {}) | {"strategy": changes["strategy"]}
    if "candidate" in changes:
        written.pop("targets", None)
        written["target"] = one_configuration(spec, changes["candidate"])
    if "repeats" in changes:
        written["traffic"] = written["traffic"] | {"repeats": changes["repeats"]}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(written, sort_keys=False))
    return path


def objective(result) -> float | None:
    """Goodput per minute within the SLOs of a candidate measured in full (None: pruned, failed, or none met)."""
    ok = result is not None and result.status == "ok" and result.headline is not None
    return result.headline.objective if ok else None


def pick(results: Mapping[str, Any]):
    """The candidate measured in full with the highest goodput within the SLOs (None: none met them)."""
    within = [r for r in results.values() if objective(r) is not None]
    return max(within, key=objective, default=None)


def engine_settings(result) -> tuple[dict[str, Any], float]:
    """A vLLM candidate's engine arguments and KV cache (GiB) from its stored configuration."""
    engine = json.loads(result.config.get("engine") or "{}")
    return {k: v for k, v in engine.items() if k not in ENGINE_EXTRA}, float(engine.get("kv_cache_gib", 1.0))


def one_configuration(spec: Mapping[str, Any], result) -> dict[str, Any]:
    """The target a candidate ran on (by its label: the target's name, or the one target), its settings as single
    values: one candidate."""
    label = result.config.get("target")
    found = [t for t in targets(spec) if not label or label in (t.get("name"), t.get("instance_type"))]
    target = copy.deepcopy(found[0])
    if result.config.get("optimization") == LLAMACPP:
        settings = asdict(LlamaCppSettings.from_engine(result.config["engine"]))
        names = {"gguf_type": "gguf_types"}  # the lists' names, where they are not the setting's own
        target["llamacpp"] = {names.get(name, name): [value] for name, value in settings.items()}
    else:
        args, kv = engine_settings(result)
        target |= {"engine_args": args, "kv_cache_gib": kv}
    return target


def is_default(result) -> bool:
    """An engine's default candidate (`vllm-default`: every listed setting left to vLLM; `llamacpp-default`:
    llama-server's own slots, batch sizes and threads)."""
    if result.config.get("optimization") == LLAMACPP:
        return LlamaCppSettings.from_engine(result.config["engine"]) == LLAMACPP_DEFAULT
    return json.loads(result.config.get("engine") or "{}").get("variant") == "default"


@dataclass(frozen=True)
class NotInTheGrid:
    """An engine's default the grid did not measure (a grid run from before it was a candidate, or one whose lists
    made a single candidate): measured in the paired run only, on the grid best's target and wire."""

    name: str
    key: str
    config: dict[str, Any]


def engine_default(results: Mapping[str, Any], best) -> Any:
    """The default of `best`'s engine: the grid's own run of it, else a NotInTheGrid stand-in."""
    engine = best.config.get("optimization")
    found = next((r for r in results.values() if is_default(r) and r.config.get("optimization") == engine), None)
    if found is not None:
        return found
    protocol = json.loads(best.config.get("engine") or "{}").get("protocol", "openai-chat")
    if engine == LLAMACPP:
        settings = LLAMACPP_DEFAULT.engine(protocol)
        name = "llamacpp-default"
    else:
        settings = json.dumps({"protocol": protocol, "variant": "default"}, sort_keys=True)
        name = "vllm-default"
    config = {"optimization": engine, "engine": settings, "target": best.config.get("target")}
    return NotInTheGrid(f"{name} (not in the grid's run)", f"not-in-the-grid:{engine}", config)


@dataclass(frozen=True)
class Search:
    strategy: str
    wall_s: float
    results: dict[str, Any]

    def line(self) -> str:
        statuses = [r.status for r in self.results.values()]
        best = pick(self.results)
        shown = f"{best.name} {objective(best):,.0f} good requests/min" if best is not None else "none met the SLOs"
        counts = f"{statuses.count('ok')} measured in full, {statuses.count('pruned')} pruned"
        return f"{self.strategy}: {self.wall_s:,.0f} s, {len(statuses)} candidates ({counts}); pick {shown}"


def run_search(folder: Path, spec: Mapping[str, Any], strategy: str, number: int, reuse: bool = False) -> Search:
    """One strategy's run; with `reuse`, a finished run of it already in `folder` (its database and log) is read
    instead of run again (`recorded_wall`)."""
    path, log = folder / f"llm-{strategy}.yaml", folder / f"llm-{strategy}-{number}.log"
    if reuse and path.exists() and log.exists():
        wall = recorded_wall(path, log)
        print(f"{strategy}: the finished run in {folder} is read, not run again ({wall:,.0f} s)", flush=True)
        return Search(strategy, wall, decided(f"sqlite:///{folder / f'{path.stem}-{number}.db'}", path))
    path = write(folder, spec, f"llm-{strategy}", strategy=strategy)
    wall, url = run_once(folder, path, number)
    return Search(strategy, wall, decided(url, path))


def recorded_wall(spec: Path, log: Path) -> float:
    """A finished run's wall seconds: the `.wall` file run_once writes beside its log, else (a run from before that
    file) from the log's time less its experiment file's (written just before the run starts, the log just after it
    ends)."""
    kept = log.with_suffix(".wall")
    if kept.exists():
        return float(kept.read_text())
    return log.stat().st_mtime - spec.stat().st_mtime


def paired_picks(
    folder: Path, spec: Mapping[str, Any], picks: Mapping[str, Any], rounds: int, tag: str, reuse: bool = False
):
    """Each configuration of `picks` (label -> its result) measured once per round, 1 repeat, in the alternating order:
    label -> goodput/min within the SLOs per round (None: outside them, or that run failed: printed). With `reuse`, a
    round that finished earlier in `folder` is read, not run again."""
    paths = {}
    for label, result in picks.items():
        name = f"{tag}-{label.replace(' ', '-')}"
        paths[label] = write(folder, spec, name, strategy="grid", candidate=result, repeats=1)
    figures: dict[str, list[float | None]] = {label: [] for label in picks}
    for number, labels in enumerate(paired.order(list(picks), rounds), start=1):
        for label in labels:
            try:
                kept = finished_run(folder, paths[label], number) if reuse else None
                if kept is not None:
                    print(f"paired run, round {number}, {label}: the finished round is read, not run again")
                _, url = kept or run_once(folder, paths[label], number)
                result = next(iter(decided(url, paths[label]).values()), None)
            except RunFailed as failure:
                print(f"paired run, round {number}, {label}: failed: {_one_line(str(failure))}")
                result = None
            figures[label].append(objective(result))
    return figures


def judge_picks(
    folder: Path, spec: Mapping[str, Any], grid: Search, adaptive: Search, rounds: int, tag: str, reuse: bool = False
):
    """The grid's best, adaptive's pick and the engine's default, each measured once (a pick that is another's shares
    its figures) in one paired run; each judged against the grid's best. Returns (rows, adaptive's verdict, the
    lines on each pick against the default)."""
    best = pick(grid.results)
    if best is None:
        return ["the grid found no configuration within the SLOs"], "n/a", []
    default = engine_default(grid.results, best)  # the default of the grid best's engine: what tuning it added
    chosen = {GRID_BEST: best, ADAPTIVE: pick(adaptive.results), DEFAULT: default}
    first: dict[str, str] = {}  # configuration key -> the label it is measured under
    for label, result in chosen.items():
        if result is not None:
            first.setdefault(result.key, label)
    measured = {label: chosen[label] for label in first.values()}
    figures = paired_picks(folder, spec, measured, rounds, tag, reuse) if rounds and len(measured) > 1 else {}
    rows, verdict = [], "n/a (adaptive picked none)"
    for label, result in chosen.items():
        if result is None:
            rows.append(f"| {label} | (none) | | n/a |")
            continue
        values = figures.get(first[result.key], [])
        if label == GRID_BEST:
            said = "reference"
        elif result.key == best.key:
            said = "same"
        else:
            said = str(paired.judge(figures.get(GRID_BEST, []), values)).replace("IPM", "good requests/min")
        if label == ADAPTIVE:
            verdict = said
        shown = ", ".join("n/a" if v is None else f"{v:,.0f}" for v in values) or "not measured"
        rows.append(f"| {label} | {result.name} | {shown} | {said} |")
    against = [
        over_default(label, chosen[label].name, figures.get(first[chosen[label].key], []), figures.get(DEFAULT, []))
        for label in (ADAPTIVE, GRID_BEST)
        if chosen[label] is not None and default is not None and chosen[label].key != default.key
    ]
    return rows, verdict, against


def across_runs(runs: Sequence[tuple[float, str]]) -> list[str]:
    """The search targets over every run: each run's (adaptive / grid wall time, adaptive's verdict against the grid's
    best). A pick found is one that is the grid's best, tied with it or measured above it in the paired run."""
    if not runs:
        return []
    found = [verdict for _, verdict in runs if verdict == "same" or verdict.startswith(("tied", "NOT tied (above)"))]
    ratios = ", ".join(f"{ratio:.2f}" for ratio, _ in runs)
    return [
        "## Across the runs",
        "",
        f"- adaptive's pick was the grid's best, or tied with it, or above it, in {len(found)} of {len(runs)} runs "
        "(target: every run)",
        f"- wall time adaptive / grid per run: {ratios}; the largest {max(r for r, _ in runs):.2f} (target <= 0.30)",
        "",
    ]


def over_default(label: str, name: str, values: list[float | None], default: list[float | None]) -> str:
    """A pick's goodput against the engine default's in the same paired rounds: the ratio of their means over the
    rounds where both were measured within the SLOs (target >= 1.5)."""
    both = [(v, d) for v, d in zip(values, default, strict=False) if v is not None and d is not None]
    if not both:
        return f"{label} ({name}) against the engine default: no round measured both within the SLOs"
    mine, theirs = (sum(pair[i] for pair in both) / len(both) for i in (0, 1))
    ratio = f"{mine / theirs:.2f}x" if theirs > 0 else "the default had no goodput"
    return (
        f"{label} ({name}) against the engine default: {ratio} its goodput per instance-hour ({mine:,.0f} against "
        f"{theirs:,.0f} good requests/min, mean of {len(both)} paired rounds; target >= 1.5x)"
    )


def gate_rows(results: Mapping[str, Any]) -> list[str]:
    """The generation gate's verdict on every candidate (the grid measures them all): status and its sentence."""
    rows = ["| candidate | status | the gate |", "|---|---|---|"]
    for result in sorted(results.values(), key=lambda r: r.name):
        rows.append(f"| {result.name} | {result.status} | {describe(result.correctness)} |")
    return rows


@dataclass(frozen=True)
class AiperfSearch:
    label: str
    concurrency: int | None  # AIPerf's highest concurrency meeting the SLAs (None: none, or it failed)
    iterations: int
    wall_s: float
    error: str | None = None
    output_tps: float | None = None  # its objective there: output tokens/s (AIPerf's output_token_throughput)
    reason: str | None = None  # why its search stopped (its convergence_reason)

    def row(self) -> str:
        found = "none met the SLAs" if self.concurrency is None else f"concurrency {self.concurrency}"
        if self.output_tps is not None:
            found += f", {self.output_tps:,.0f} output tokens/s"
        said = f"failed: {self.error}" if self.error else f"{found} ({self.reason})"
        return f"| AIPerf on the {self.label} | {said} | {self.iterations} | {self.wall_s:,.0f} s |"


def served(result, model: Path, out: Path) -> contextlib.AbstractContextManager[str]:
    """A server with `result`'s engine settings on loopback: its OpenAI base url while the `with` lasts."""
    if result.config.get("optimization") == LLAMACPP:
        return _llamacpp_url(result, model, out)
    args, kv = engine_settings(result)
    flags = engine_flags(args, known_flags(VLLM_PYTHON))
    return vllm_server(model, out / "vllm.log", SERVED, max_num_seqs=None, flags=flags, kv_cache_gib=int(kv))


@contextlib.contextmanager
def _llamacpp_url(result, model: Path, out: Path) -> Iterator[str]:
    with LlamaCppTarget().deploy(model, SERVED, out / "llamacpp", config=result.config) as deployment:
        yield deployment.host  # without /v1, as vllm_server gives it


def aiperf_targets(grid: Search, adaptive: Search, named: Sequence[str] = ()) -> list[tuple[str, Any]]:
    """What AIPerf's search runs on, each configuration once: the grid's best, adaptive's pick, the engine's default
    (AIPerf tuning the load of the server as it comes: what tuning the server adds beside it) and each candidate of
    the grid's run `named` (None for a name the grid did not run: its row says so)."""
    best = pick(grid.results)
    if best is None:
        return []
    by_name = {r.name.split("@")[0]: r for r in grid.results.values()}  # its name without the target's label
    default = engine_default(grid.results, best)
    chosen = [("grid best", best), ("adaptive pick", pick(adaptive.results)), (DEFAULT, default)]
    kept: dict[str, tuple[str, Any]] = {}  # configuration key -> (label, result): each configuration searched once
    for label, result in chosen + [(name, by_name[name]) for name in named if name in by_name]:
        if result is not None:
            kept.setdefault(result.key, (label, result))
    return [*kept.values(), *((name, None) for name in named if name not in by_name)]


def aiperf_row(spec: Mapping[str, Any], label: str, result, work: Path) -> str:
    """AIPerf's search on one target, as its table row (a name the grid did not run: said, nothing run)."""
    if result is None:
        return AiperfSearch(label, None, 0, 0.0, error="not a candidate of the grid's run").row()
    return aiperf_search(spec, result, label, work).row()


def aiperf_search(spec: Mapping[str, Any], result, label: str, work: Path) -> AiperfSearch:
    """AIPerf's max-concurrency-under-sla (monotonic) on a server with `result`'s engine settings."""
    started = time.monotonic()
    slo, traffic = spec["slo"], spec["traffic"]
    generation = spec["payload"]["generation"]
    try:
        model = llama_folder(load_spec(write(work, spec, f"aiperf-{label.replace(' ', '-')}")).model.architecture)
        out = work / f"aiperf-{label.replace(' ', '-')}"
        shutil.rmtree(out / "artifacts", ignore_errors=True)  # an earlier search's history is not this one's
        with served(result, model, out) as url:
            command = [str(AIPERF), "profile", "--model", SERVED, "--url", url, "--endpoint-type", "chat"]
            command += ["--streaming", "--tokenizer", str(model), "--extra-inputs", "ignore_eos:true"]
            command += ["--prompt-input-tokens-mean", str(generation["input_tokens"]["mean"])]
            command += ["--prompt-input-tokens-stddev", str(generation["input_tokens"].get("stddev", 0))]
            command += ["--prompt-output-tokens-mean", str(generation["output_tokens"]["mean"])]
            command += ["--search-recipe", "max-concurrency-under-sla", "--search-style", "monotonic"]
            command += ["--ttft-sla-ms", str(slo["ttft_ms"]["p95"]), "--itl-sla-ms", str(slo["itl_ms"]["p95"])]
            command += ["--concurrency-min", "1", "--concurrency-max", str(max(traffic["concurrency"]["users"]))]
            command += ["--benchmark-duration", str(traffic["concurrency"]["duration_seconds"])]
            command += ["--artifact-dir", str(out / "artifacts"), "--ui", "none", "--no-gpu-telemetry"]
            command += ["--no-server-metrics", "--random-seed", "0"]
            if result.config.get("optimization") == LLAMACPP:
                # a new connection per request: on AIPerf's pooled connections llama-server (cpp-httplib, which
                # closes a connection idle 5 s and after 100 requests) intermittently ended requests "Server
                # disconnected" before its slots saw them (1 of 32 and 2 of 11 at concurrency 1; none in 69 with
                # `never`); AIPerf counted them errors and no concurrency met its SLAs. Our generator saw none.
                command += ["--connection-reuse-strategy", "never"]
            env = {name: value for name, value in os.environ.items() if name != "HF_HUB_OFFLINE"}
            done = children_run(command, env, out / "aiperf.log")
        if done != 0:
            raise RuntimeError(f"aiperf exited {done} (its log: {out / 'aiperf.log'})")
        history = next((out / "artifacts").rglob("search_history.json"), None)
        if history is None:
            raise RuntimeError(f"aiperf wrote no search_history.json under {out / 'artifacts'}")
        found = json.loads(history.read_text())
        boundary = (found.get("boundary_summary") or {}).get("feasible_max") or {}  # {value, objective_value, ...}
        value, tps = boundary.get("value"), boundary.get("objective_value")
        return AiperfSearch(
            label,
            int(value) if isinstance(value, int | float) else None,
            len(found.get("iterations") or []),
            time.monotonic() - started,
            output_tps=float(tps) if isinstance(tps, int | float) else None,
            reason=found.get("convergence_reason"),
        )
    except Exception as failure:  # the peer tool's failure is its result, recorded, not our error
        return AiperfSearch(
            label, None, 0, time.monotonic() - started, _one_line(f"{type(failure).__name__}: {failure}")
        )


def children_run(command: list[str], env: dict[str, str], log: Path) -> int:
    """Run a peer tool to its end (stopped with its group if we are interrupted), its output to `log`; its exit
    status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as out:
        return children.run(command, env=env, stdout=out, stderr=out).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 3 candidates, 2 short levels, 1 run")
    parser.add_argument("--runs", type=int, default=1, help="runs of each strategy (alternating)")
    parser.add_argument("--paired-rounds", type=int, default=None, help="rounds of the paired run (default 5; 2 quick)")
    parser.add_argument("--no-aiperf", action="store_true", help="skip AIPerf's search")
    parser.add_argument(
        "--aiperf-on",
        action="append",
        default=[],
        metavar="CANDIDATE",
        help="also run AIPerf's search on this candidate of the grid's run (its name; repeatable), beside the grid's "
        "best, adaptive's pick and the engine's default",
    )
    parser.add_argument("--work-dir", type=Path, default=None, help="keep the runs here (default: a temporary folder)")
    parser.add_argument("--out", type=Path, default=None, help="also write the report (markdown) here")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="read a strategy's finished run, and a paired run's finished rounds, already in --work-dir instead of "
        "running them again (a benchmark stopped part way goes on from there; a further --runs adds its runs)",
    )
    args = parser.parse_args(argv)
    children.stop_on_sigterm()
    rounds = args.paired_rounds if args.paired_rounds is not None else (2 if args.quick else 5)
    spec = experiment(yaml.safe_load(EXPERIMENT.read_text()), args.quick)
    folder = args.work_dir or Path(tempfile.mkdtemp(prefix="llm-search-"))
    folder.mkdir(parents=True, exist_ok=True)
    command = "python benchmarks/llm_search.py " + " ".join(argv if argv is not None else sys.argv[1:])
    lines = [f"# LLM search: grid against adaptive on {EXPERIMENT.name}", "", f"command: `{command.strip()}`", ""]
    runs: list[tuple[float, str]] = []
    for number in range(1, args.runs + 1):
        order = ("grid", "adaptive") if number % 2 else ("adaptive", "grid")
        searches = {strategy: run_search(folder, spec, strategy, number, args.reuse) for strategy in order}
        grid, adaptive = searches["grid"], searches["adaptive"]
        rows, verdict, against = judge_picks(folder, spec, grid, adaptive, rounds, f"run{number}", args.reuse)
        lines += [f"## Run {number}", "", f"- {grid.line()}", f"- {adaptive.line()}"]
        lines += [f"- wall time adaptive / grid: {adaptive.wall_s / grid.wall_s:.2f} (target <= 0.30)"]
        lines += [f"- adaptive's pick against the grid's best (paired, {rounds} rounds): {verdict}", ""]
        runs.append((adaptive.wall_s / grid.wall_s, verdict))
        lines += ["| configuration | candidate | good requests/min per round | against the grid's best |"]
        lines += ["|---|---|---|---|", *rows, "", *(f"- {line}" for line in against), ""]
        lines += ["The generation gate on every candidate (the grid's run):", "", *gate_rows(grid.results), ""]
        if not args.no_aiperf:
            peer = [aiperf_row(spec, label, r, folder) for label, r in aiperf_targets(grid, adaptive, args.aiperf_on)]
            lines += [
                "| AIPerf max-concurrency-under-sla (monotonic) | found | iterations | wall |",
                "|---|---|---|---|",
            ]
            lines += [*peer, ""]
        print("\n".join(lines[-60:]), flush=True)
    report = "\n".join(lines + across_runs(runs))
    print(report)
    if args.out is not None:
        args.out.write_text(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(children.exit_interrupted(main))
