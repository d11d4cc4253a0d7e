"""Adaptive search against the full grid on the same model and grid: wall time and pick, side by side.

    python benchmarks/search.py            # 12 candidates, concurrency 1 2 4 8 x 8 s x 3 repeats,
                                           # 3 runs of each, Model Analyzer in each run (~110 min)
    python benchmarks/search.py --model minilm   # the same on the real MiniLM at sequence length 128
    python benchmarks/search.py --runs 1   # the same grid, 1 run of each strategy (~35 min on this host)
    python benchmarks/search.py --quick    # smoke test: 2 candidates, concurrency 1 4, 1 run of each
    python benchmarks/search.py --paired-rounds 0   # no paired run (below)

The grid measures every candidate with the experiment's full schedule (every level, every repeat). Adaptive probes
the candidates its climb along instance count and max batch size reaches (search/structure.py; a candidate that is
the same server as one probed is not deployed again) with a short load search (each tried level `probe_seconds`
long, 1 repeat), then, best probe first, measures in full only those whose probe could still change the pick
(racing.judge: at most ceil(12 / 3) = 4, plus any probe that separates above them).

Each run is `recommender run FILE --fresh` in a subprocess against its own fresh SQLite database (the real
tritonserver, real Locust), the two strategies alternating. The model is exported once before any timing. Per run
pair it prints the wall-time ratio adaptive / grid (target <= 0.4) and whether adaptive's pick is the grid's best
or tied with it, judged by the objective both strategies search: the highest MaxInvocations within the limits.
"Tied" means their MaxInvocations 95 % intervals overlap in the GRID's own measurement of both, the rule the search
races by (search/racing.py). It is NOT the ranking's tie rule (decide/ranking.py is_tied: the throughput AND the
latency intervals overlap), which orders a recommendation by the decision's weighted objectives.

Where Triton Model Analyzer is installed ($PEERS/ma/bin/model-analyzer, see benchmarks/peers_setup.sh), its quick
search then runs on the same model repository (the same exported model, same threads, same input ids) over the same
space (instance counts up to 3, max batch sizes up to 8, client concurrency up to 8, p95 under the same threshold):
its version (asked of the tool), wall time, pick and its own measured throughput. Its pick is measured by our grid's
protocol as Model Analyzer served it (its dynamic-batching queue delay and preferred sizes, read from the
config.pbtxt it generated) in the paired run below. A peer that fails (Model Analyzer, or our run of its pick) is
recorded as failed with its error, and the benchmark goes on. `--peer-only --work-dir DIR` runs only Model Analyzer
against the grid databases a previous run left in DIR, its pick taken from those runs when they hold it, else
measured in one run of its own: judged across runs, so drift is not excluded. Exits non-zero only on errors of our
own runs, never on a missed target or a peer's failure.

The paired run (issue 37): after each run's grid, adaptive search and Model Analyzer, the grid's best, adaptive's pick
and Model Analyzer's pick (as it served it) are measured together, `--paired-rounds` rounds (default 5), each
configuration once per round by the grid's protocol with 1 repeat (a `recommender run --fresh` of its own), in an
order that alternates from round to round (benchmarks/paired.py). Each pick is judged against the grid's best by the
per-round differences: tied when their mean's 95 % interval contains 0. Between runs the same configuration drifts
more than the configurations differ, so a pick measured in one run and the grid's best in another are not compared.
A pick that is the grid's best is "same" and not measured twice; a failed round is printed and left out.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import children  # noqa: E402  (benchmarks/, next to this script)
import paired  # noqa: E402
import peer_model_analyzer as model_analyzer  # noqa: E402

from recommender.candidates import Candidate, expand_candidates, model_fingerprint  # noqa: E402
from recommender.load.payload import inference_bodies, max_length  # noqa: E402
from recommender.metrics.intervals import tied  # noqa: E402
from recommender.modelrepo.export import export_model  # noqa: E402
from recommender.modelrepo.repository import write_model_repository  # noqa: E402
from recommender.review import decided_from_store  # noqa: E402
from recommender.spec import DynamicBatching, load_spec  # noqa: E402
from recommender.store.results import ResultStore  # noqa: E402

# the two models: a tiny one whose client and server overheads dominate, and the real MiniLM at sequence length 128,
# whose compute dominates (~12 ms per inference here, where configurations differ by 2x)
MODELS = {
    "tiny": "model:\n  source: bert\n  architecture: {layers: 1, hidden: 32, heads: 2, intermediate: 64}\n"
    "payload:\n  sequence_length: 16",
    "minilm": "model:\n  source: minilm\npayload:\n  sequence_length: 128",
}
THRESHOLD_MS = {"tiny": 100.0, "minilm": 500.0}  # p95 limit: well above one inference, so the levels tell apart
SPEC = """name: search-{name}
{model}
correctness: off
variants:
  optimizations: [pt]
  dynamic_batching: {batching}
  instance_group_counts: {counts}
  max_batch_sizes: {sizes}
target: {{kind: local, instance_type: local-cpu}}
traffic:
  warmup_seconds: {window}
  window_seconds: {window}
  repeats: {repeats}
  stability: {{windows: 3}}
  concurrency: {{users: {users}, duration_seconds: {seconds}}}
  until_known: false  # the protocol recorded in docs/benchmarks.md (levels of 3 windows: too short to end early)
latency_threshold: {{percentile: p95, ms: {threshold}}}
search: {{strategy: {strategy}, racing: {{final_repeats: 3, eta: 3, margin: 0.1, probe_seconds: {probe}}}}}
decision: {{max_extra_seconds: 0}}  # the strategies are timed on their search alone: no tie-break after it
"""
FULL = dict(
    batching="[false, true]",
    counts="[1, 2, 3]",
    sizes="[1, 8]",
    users="[1, 2, 4, 8]",
    seconds=8,
    window=2,
    probe=4,
    runs=3,
    repeats=3,
    model=MODELS["tiny"],
)
# the smoke test's grid: the full one with 2 candidates, 2 short levels, 1 run
QUICK = FULL | dict(
    batching="[false]",
    counts="[1, 2]",
    sizes="[8]",
    users="[1, 4]",
    seconds=3,
    window=1,
    probe=2,
    runs=1,
)
PAIRED_ROUNDS = {"full": 5, "quick": 2}  # the paired run's rounds by default


def write_spec(folder: Path, strategy: str, grid: dict, threshold: float, name: str | None = None) -> Path:
    fields = {k: v for k, v in grid.items() if k != "runs"}
    path = folder / f"{name or strategy}.yaml"
    path.write_text(SPEC.format(name=name or strategy, strategy=strategy, threshold=threshold, **fields))
    return path


class RunFailed(RuntimeError):
    """`recommender run` exited non-zero; the message holds the tail of its output."""


def run_once(folder: Path, spec: Path, number: int) -> tuple[float, str]:
    """One `recommender run --fresh`, its output kept as FOLDER/STEM-NUMBER.log and, when it finished, its wall seconds
    as .wall; returns (wall seconds, database URL); raises RunFailed."""
    url = f"sqlite:///{folder / f'{spec.stem}-{number}.db'}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.monotonic()
    done = children.run(  # interrupted: the run tears its server down (SIGTERM), as it does for a user
        [
            sys.executable,
            "-m",
            "recommender",
            "run",
            str(spec),
            "--fresh",
            "--db",
            url,
            "--run-dir",
            str(folder / "runs"),
        ],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
    )
    wall = time.monotonic() - started
    # what the user would have seen, kept beside its database (the README's worked examples quote such runs)
    (folder / f"{spec.stem}-{number}.log").write_text(f"{done.stdout}\n--- stderr ---\n{done.stderr}")
    if done.returncode != 0:
        raise RunFailed(
            f"recommender run {spec.name} failed (exit {done.returncode}):\n"
            f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        )
    (folder / f"{spec.stem}-{number}.wall").write_text(f"{wall:.3f}\n")  # only for a run that finished
    return wall, url


def finished_run(folder: Path, spec: Path, number: int) -> tuple[float, str] | None:
    """The (wall seconds, database URL) of a run that run_once finished earlier in `folder` (its .wall file), else
    None."""
    wall = folder / f"{spec.stem}-{number}.wall"
    if not wall.exists():
        return None
    return float(wall.read_text()), f"sqlite:///{folder / f'{spec.stem}-{number}.db'}"


def decided(url: str, spec_path: Path) -> dict:
    spec = load_spec(spec_path)
    results = decided_from_store(ResultStore.open(url), spec.name, spec)
    return {r.key: r for r in results}


def measured_in_full(results: dict) -> str:
    """Adaptive's decisions: how many candidates were measured in full and how many pruned after their probe."""
    statuses = [r.status for r in results.values()]
    return f"{statuses.count('ok')} full, {statuses.count('pruned')} pruned"


def pick(results: dict):
    """The objective searched: the highest MaxInvocations among the candidates measured within the limits."""
    within = [r for r in results.values() if r.status == "ok" and r.headline and r.headline.max_invocations]
    return max(within, key=lambda r: r.headline.max_invocations, default=None)


def verdict(grid: dict, adaptive: dict) -> str:
    chosen = pick(adaptive)
    return compare(grid, chosen.key, "adaptive") if chosen else f"n/a (adaptive picked none; grid best {pick(grid)})"


TIE_WORDS = {
    True: "tied on MaxInvocations (95 % intervals overlap)",
    False: "NOT tied on MaxInvocations (95 % intervals apart)",
    None: "unknown (no MaxInvocations interval)",
}


def compare(grid: dict, key: str, who: str, elsewhere=None) -> str:
    """`same`, `tied` or `NOT tied` on the objective searched: a picked configuration against the grid's best, on the
    grid's measurement of both (or on `elsewhere`, a CandidateResult of the same protocol measured in its own run,
    when the grid lacks it). Tied = their MaxInvocations intervals overlap (the racing rule, not the ranking's)."""
    best = pick(grid)
    if best is None:
        return "n/a (the grid found no configuration within the limits)"
    if key == best.key:
        return f"same ({best.name})"
    theirs = grid.get(key, elsewhere)
    if theirs is None or theirs.headline is None:
        return f"n/a ({who}'s pick was not measured)"
    word = TIE_WORDS[tied(best.headline.ipm_interval, theirs.headline.ipm_interval)]
    where = "the grid's measurement" if key in grid else "our measurement of it, in a run of its own"
    return (
        f"{word}: {who} {theirs.name} {theirs.headline.max_invocations or 0:,.0f} IPM in {where} vs grid "
        f"best {best.name} {best.headline.max_invocations:,.0f}"
    )


@dataclass(frozen=True)
class PeerOutcome:
    """What the peer tool gave: its pick, or the error it failed with."""

    label: str  # e.g. "Model Analyzer 1.58.0 quick", the version as the tool reports it
    found: model_analyzer.QuickSearch | None
    error: str | None = None


def run_peer(repository: Path, bodies: list[dict], threshold_ms: float, work: Path) -> PeerOutcome:
    """Model Analyzer's quick search (instances <= 3, max batch <= 8, concurrency <= 8); a failure is an outcome."""
    label = f"Model Analyzer {model_analyzer.version()} quick"
    try:
        found = model_analyzer.quick_search(repository, "model", bodies, threshold_ms, 3, 8, 8, work)
    except Exception as failure:  # whatever the peer tool does wrong is its result, recorded, not our error
        return PeerOutcome(label, None, f"{type(failure).__name__}: {failure}")
    return PeerOutcome(label, found)


def choice_of(batching: DynamicBatching | None, instances: int, max_batch: int) -> dict:
    """The grid settings of exactly one configuration: dynamic batching off, or on with its queue delay and preferred
    sizes, its instance count and max batch size."""
    if batching is None:
        written = "[false]"
    else:
        sizes = batching.preferred_batch_size
        listed = f", preferred_batch_size: {list(sizes)}" if sizes else ""
        written = f"[{{max_queue_delay_microseconds: {batching.max_queue_delay_microseconds}{listed}}}]"
    return {"batching": written, "counts": f"[{instances}]", "sizes": f"[{max_batch}]"}


def peer_batching(found: model_analyzer.QuickSearch) -> DynamicBatching | None:
    """The peer's pick's dynamic batching as it served it: ITS queue delay and preferred sizes (quick search leaves
    Triton's default delay, 0 us; ours is 100 us), or None (off)."""
    if not found.dynamic_batching:
        return None
    return DynamicBatching(
        max_queue_delay_microseconds=found.queue_delay_us, preferred_batch_size=list(found.preferred_batch_sizes)
    )


def peer_choice(found: model_analyzer.QuickSearch) -> dict:
    """The grid settings that measure the peer's pick as it served it."""
    return choice_of(peer_batching(found), found.instance_count, found.max_batch_size)


def peer_candidate(found: model_analyzer.QuickSearch, spec) -> Candidate:
    return Candidate(
        "pt",
        peer_batching(found),
        found.instance_count,
        found.max_batch_size,
        spec.target.instance_type,
        model_fingerprint(spec),
    )


def paired_run(
    folder: Path, grid_settings: dict, threshold_ms: float, picks: dict[str, Candidate], rounds: int, tag: str
) -> dict[str, list[float | None]]:
    """Each configuration of `picks` (label -> candidate) measured once per round by the grid's protocol with 1
    repeat, each round a `recommender run --fresh` per configuration in the alternating order (paired.order): label ->
    MaxInvocations within the limits per round (None: outside them, or that run failed: printed)."""
    specs = {
        label: write_spec(
            folder,
            "grid",
            {**grid_settings, **choice_of(c.dynamic_batching, c.instance_group_count, c.max_batch_size), "repeats": 1},
            threshold_ms,
            f"{tag}-{label.replace(' ', '-')}",
        )
        for label, c in picks.items()
    }
    figures: dict[str, list[float | None]] = {label: [] for label in picks}
    for number, labels in enumerate(paired.order(list(picks), rounds), start=1):
        for label in labels:
            try:
                _, url = run_once(folder, specs[label], number)
                result = next(iter(decided(url, specs[label]).values()), None)
            except RunFailed as failure:
                print(f"paired run, round {number}, {label}: failed: {_one_line(str(failure))}")
                result = None
            ok = result is not None and result.status == "ok" and result.headline is not None
            figures[label].append(result.headline.max_invocations if ok else None)  # type: ignore[union-attr]
    return figures


GRID_BEST, ADAPTIVE, PEER = "grid best", "adaptive pick", "Model Analyzer pick"


def judge_picks(
    grid: dict, adaptive: dict, found: model_analyzer.QuickSearch | None, spec, measure
) -> tuple[dict[str, str], list[str]]:
    """Adaptive's and Model Analyzer's picks against the grid's best, judged in ONE paired run: `measure(picks)` (label
    -> candidate, the grid's best first; each configuration once) gives each label's MaxInvocations per round
    (`paired_run`). A pick that is the grid's best is "same"; a pick that is the other's shares its figures. Returns
    each pick's verdict (label -> words) and the table's rows."""
    best = pick(grid)
    if best is None:
        return {}, []
    every = {c.key: c for c in expand_candidates(spec)}
    keys = {GRID_BEST: best.key}
    chosen = pick(adaptive)
    if chosen is not None:
        keys[ADAPTIVE] = chosen.key
    if found is not None:
        peer = peer_candidate(found, spec)
        every.setdefault(peer.key, peer)
        keys[PEER] = peer.key
    first: dict[str, str] = {}  # configuration key -> the label it is measured under
    for label, key in keys.items():
        first.setdefault(key, label)
    figures = measure({label: every[key] for key, label in first.items()}) if len(first) > 1 else {}
    verdicts, rows = {}, []
    for label in (GRID_BEST, ADAPTIVE, PEER):
        key = keys.get(label)
        if key is None:
            verdicts[label] = "n/a (no pick)"
            rows.append(f"| {label} | (none) | | n/a (no pick) |")
            continue
        values = figures.get(first[key], [])
        if label == GRID_BEST:
            said = "reference"
        elif key == best.key:
            said = "same"
        else:
            said = str(paired.judge(figures.get(GRID_BEST, []), values))
        verdicts[label] = said
        shown = ", ".join("n/a" if v is None else f"{v:,.0f}" for v in values) or "not measured"
        rows.append(f"| {label} | {every[key].name} | {shown} | {said} |")
    verdicts.pop(GRID_BEST)
    return verdicts, rows


def side_by_side(
    folder: Path,
    grid_spec: Path,
    artifact,
    threshold_ms: float,
    grid_urls: list[str],
    grid_settings: dict,
    tag: str = "model-analyzer",
) -> model_analyzer.QuickSearch | None:
    """Model Analyzer's quick search on the same model repository and space. With `grid_urls` (--peer-only), its pick
    is measured by our grid's protocol as it served it (from those grid runs when they hold it, else in one run of its
    own) and set against each grid's best: across runs, so drift is not excluded. Without (the benchmark's own runs),
    it is judged in the paired run that follows (`paired_run`). A failure of the peer, or of our run of its pick, is
    printed as such; nothing is raised. Returns what the peer found (None: not installed or failed); `tag` names its
    folder under `folder`."""
    if not model_analyzer.executable().exists():
        print(
            f"Model Analyzer: not installed here ({model_analyzer.executable()} missing; benchmarks/peers_setup.sh "
            "installs it): no side-by-side run"
        )
        return None
    spec = load_spec(grid_spec)
    base = Candidate("pt", None, 1, 8, spec.target.instance_type, model_fingerprint(spec))
    repository = write_model_repository(
        base, artifact, folder / tag / "repository", "model", threads_per_instance=1
    )  # the grid's pt candidates: 1 intra-op thread each
    print(
        f"Model Analyzer quick search (p95 <= {threshold_ms:g} ms, instances <= 3, max batch <= 8, concurrency <= 8), "
        f"load average {os.getloadavg()[0]:.2f} ...",
        flush=True,
    )
    outcome = run_peer(repository, inference_bodies(spec.payload), threshold_ms, folder / tag / "work")
    header = (
        "| tool | wall s | configurations measured | pick | its own measured throughput at the pick | "
        "its pick vs our grid's best, per grid run |\n|---|---|---|---|---|---|"
    )
    found = outcome.found
    if found is None:
        print(f"{header}\n| {outcome.label} | failed | | | | {_one_line(outcome.error)} |")
        print(f"Model Analyzer failed; its error:\n{outcome.error}")
        return None
    same = peer_candidate(found, spec)
    grids = [decided(url, grid_spec) for url in grid_urls]
    elsewhere, wall, failed = None, None, None
    if grids and same.key not in grids[0]:
        path = write_spec(folder, "grid", {**grid_settings, **peer_choice(found)}, threshold_ms, f"{tag}-pick")
        try:
            wall, url = run_once(folder, path, 1)
            elsewhere = next(iter(decided(url, path).values()))
        except RunFailed as failure:
            failed = str(failure)
    if failed:
        ours = [f"failed: our run of its pick: {_one_line(failed)}"]
    else:
        ours = [compare(grid, same.key, "Model Analyzer", elsewhere) for grid in grids]
    batching = f", queue delay {found.queue_delay_us} us" if found.dynamic_batching else ""
    print(header)
    print(
        f"| {outcome.label} | {found.wall_s:.0f} | {found.configs} ({found.measurements} points) | "
        f"{same.name}{batching} at concurrency {found.concurrency} | {found.throughput_per_s * 60:,.0f}/min "
        f"({found.throughput_per_s:,.1f}/s, p95 {found.p95_ms:.1f} ms) | "
        f"{'; '.join(ours) or 'judged in the paired run below'} |"
    )
    if wall is not None:
        print(f"(its pick is not in our grid: measured by our grid's protocol in a run of its own, {wall:.0f} s)")
    if failed:
        print(f"our run of Model Analyzer's pick failed:\n{failed}")
    return found


def _one_line(text: str | None, limit: int = 300) -> str:
    flat = " ".join((text or "").split()).replace("|", "/")
    return flat if len(flat) <= limit else flat[:limit] + " ..."


def main(argv: list[str] | None = None) -> None:
    children.stop_on_sigterm()  # SIGTERM, like Ctrl-C, stops the run under way and its server: nothing is left behind
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smoke test: 2 candidates, 2 levels, 1 run each")
    parser.add_argument("--runs", type=int, help="runs of each strategy (default 3; --quick 1)")
    parser.add_argument("--model", choices=sorted(MODELS), default="tiny", help="tiny (default) or minilm")
    parser.add_argument("--threshold-ms", type=float, help="p95 latency threshold (default: tiny 100, minilm 500)")
    parser.add_argument(
        "--paired-rounds",
        type=int,
        help="rounds of the paired run that judges the picks against the grid's best (default 5; --quick 2; 0: none)",
    )
    parser.add_argument("--work-dir", type=Path, help="keep the databases and run folders here (default: a temp dir)")
    parser.add_argument(
        "--peer-only",
        action="store_true",
        help="only Model Analyzer's side-by-side run, against the grid databases already in --work-dir",
    )
    args = parser.parse_args(argv)
    if args.peer_only and not args.work_dir:
        parser.error("--peer-only needs --work-dir (the folder of an earlier run)")
    grid_settings = {**(QUICK if args.quick else FULL), "model": MODELS[args.model]}
    threshold = args.threshold_ms or THRESHOLD_MS[args.model]
    runs = args.runs or grid_settings["runs"]
    rounds: int = PAIRED_ROUNDS["quick" if args.quick else "full"] if args.paired_rounds is None else args.paired_rounds
    folder = args.work_dir or Path(tempfile.mkdtemp(prefix="search-bench-"))
    folder.mkdir(parents=True, exist_ok=True)
    specs = {s: write_spec(folder, s, grid_settings, threshold) for s in ("grid", "adaptive")}
    spec = load_spec(specs["grid"])
    artifact = export_model(
        spec.model, "pt", max_length(spec.payload), model_fingerprint(spec), folder / ".recommender" / "artifacts"
    )
    if args.peer_only:
        urls = [f"sqlite:///{db}" for db in sorted(folder.glob("grid-*.db"))]
        side_by_side(folder, specs["grid"], artifact, threshold, urls, grid_settings)
        return
    count = len(expand_candidates(spec))
    print(f"model {args.model}, p95 <= {threshold:g} ms; grid: {count} candidates; work dir {folder}")
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} cores)")
    peer = not args.quick and model_analyzer.executable().exists()
    ratios, picks, against_peer, rows = [], [], [], []
    paired_verdicts: list[dict[str, str]] = []
    for number in range(1, runs + 1):
        order = ("grid", "adaptive") if number % 2 else ("adaptive", "grid")
        measured = {s: run_once(folder, specs[s], number) for s in order}
        ratio = measured["adaptive"][0] / measured["grid"][0]
        adaptive = decided(measured["adaptive"][1], specs["adaptive"])
        said = verdict(decided(measured["grid"][1], specs["grid"]), adaptive)
        ratios.append(ratio), picks.append(said.startswith(("same", "tied")))
        found = (
            side_by_side(folder, specs["grid"], artifact, threshold, [], grid_settings, f"model-analyzer-{number}")
            if peer
            else None
        )
        peer_s = found.wall_s if found else None
        if peer_s is not None:
            against_peer.append(measured["adaptive"][0] <= peer_s)

        def measure(configurations: dict[str, Candidate], number: int = number) -> dict:
            return paired_run(folder, grid_settings, threshold, configurations, rounds, f"paired-{number}")

        judged, paired_rows = judge_picks(
            decided(measured["grid"][1], specs["grid"]), adaptive, found, spec, measure if rounds > 0 else lambda _: {}
        )
        print(
            f"run {number}, paired run ({rounds} rounds, alternating; MaxInvocations within the limits per round; "
            "tied: the 95 % interval of the per-round difference contains 0):\n"
            "| configuration | name | MaxInvocations per round | vs the grid's best, paired |\n|---|---|---|---|"
        )
        print("\n".join(paired_rows))
        paired_verdicts.append(judged)
        rows.append(
            f"| {number} | {measured['grid'][0]:.0f} | {measured['adaptive'][0]:.0f} | "
            f"{'n/a' if peer_s is None else f'{peer_s:.0f}'} | {ratio:.2f} | {measured_in_full(adaptive)} | {said} |"
        )
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(
        "| run | grid s | adaptive s | Model Analyzer quick s | adaptive / grid | adaptive measured | "
        "adaptive's pick vs the grid's best (MaxInvocations within the limits) |\n|---|---|---|---|---|---|---|"
    )
    print("\n".join(rows))
    print(f"wall-time ratio <= 0.4 in every run -> {'PASS' if max(ratios) <= 0.4 else 'FAIL'} (max {max(ratios):.2f})")
    print(
        "adaptive pick the same as, or tied on MaxInvocations with, the grid's best in every run -> "
        f"{'PASS' if all(picks) else 'FAIL'}"
    )
    for label in (ADAPTIVE, PEER):
        judged_runs = [v[label] for v in paired_verdicts if label in v and not v[label].startswith("n/a")]
        if judged_runs:
            good = sum(v.startswith(("same", "tied")) for v in judged_runs)
            print(
                f"{label} the same as, or tied with, the grid's best in the paired run: {good} of {len(judged_runs)} "
                "runs"
            )
    if against_peer:
        print(
            "adaptive wall time <= Model Analyzer quick's in every run -> "
            f"{'PASS' if all(against_peer) else 'FAIL'} ({sum(against_peer)} of {len(against_peer)})"
        )
    elif args.quick:
        print("Model Analyzer: not run in --quick (its quick search alone takes about 6 minutes here)")


if __name__ == "__main__":
    try:
        sys.exit(children.exit_interrupted(main))
    except RunFailed as failure:
        sys.exit(str(failure))
