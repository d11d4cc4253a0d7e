"""Replay search strategies against a stored grid: how often each one's pick is tied with the grid's best, and what
it would have cost, without measuring anything again.

    python benchmarks/replay.py --db benchmarks/data/grid100.db.xz --spec benchmarks/replay_grid100.yaml   # stored here
    python benchmarks/replay.py --db sqlite:///grid100.db --spec grid100.yaml            # one you measured; 20 seeds
    python benchmarks/replay.py --db ... --spec ... --seeds 20 --probe-seconds 3 --final-repeats 3 --eta 10

The grid (`search: grid`, every candidate, every level of the traffic plan) is measured once and stored by
`recommender run`, with `traffic.repeats` independent load runs per candidate (2 for the judge below). Each strategy
then runs as the job runs it (the real ask / follow / tell objects of recommender/search/), but every measurement is
drawn from the store instead of a server: a probe level or a final repeat of n windows draws n of that candidate's
stored windows at that load, from ONE stored repeat (the sampled one: seed modulo the repeats), with replacement
(seeded), and is judged by the real decision code (metrics/levels.py). Simulated seconds per deployed candidate: its
stored export, deploy, probe, correctness and teardown stages, plus each load run's nominal length and the stored
per-run start cost (the grid's load stage less its nominal seconds, per repeat). The reference is a one-repeat grid's
own time, stored: every stage, the load stage divided by the repeats stored.

Two readings judge each pick (`Reading`); a pick is "same" when it is the reading's best, "tied" when their
MaxInvocations 95 % intervals overlap (the rule racing searches by, search/racing.py):
- in-sample: each candidate decided over the windows of the sampled repeat, the one the draws came from, with its
  window-only interval (the replay before issue 37, optimistic: a candidate best in that repeat by chance is "same");
- held-out: each candidate's MaxInvocations in the OTHER repeats (each decided on its own windows, their mean), its
  interval from the run-to-run variance: the relative spread of the candidates' repeats, pooled over every candidate
  within the limits in all of them (`Grid.run_to_run`). With 1 stored repeat there is no held-out reading (said).

`benchmarks/data/grid100.db.xz` is the grid docs/benchmarks.md "Replay" reports (SQLite, xz-compressed: 0.2 MB); a
path to a .db or .db.xz file is read as such (decompressed into a temporary folder).
"""

from __future__ import annotations

import argparse
import dataclasses
import lzma
import math
import random
import shutil
import statistics
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from recommender.candidates import Candidate, CandidateResult, RunStatus, expand_candidates  # noqa: E402
from recommender.load.shapes import compile_traffic  # noqa: E402
from recommender.measurement.load_search import LoadSearch, probe_length  # noqa: E402
from recommender.metrics.headline import Headline, Measured  # noqa: E402
from recommender.metrics.intervals import Interval, t_quantile_95, tied  # noqa: E402
from recommender.metrics.levels import WindowRecord, decide, judge_levels  # noqa: E402
from recommender.metrics.rules import Rules  # noqa: E402
from recommender.search.adaptive import AdaptiveSearch  # noqa: E402
from recommender.search.work import Work  # noqa: E402
from recommender.spec import ExperimentSpec, load_spec  # noqa: E402
from recommender.spec.search import UNIMODAL_AXES  # noqa: E402
from recommender.store.results import ResultStore  # noqa: E402

NOT_LOAD = ("export", "deploy", "probe", "correctness", "teardown")


@dataclass(frozen=True)
class Stored:
    """One candidate of the stored grid: its windows per repeat and load, what a deployment of it cost, each stored
    repeat's verdict."""

    candidate: Candidate
    windows: dict[int, dict[float, list[WindowRecord]]]  # stored repeat -> offered load -> steady-state windows
    overhead_s: float  # every stage but the load: what deploying it costs
    seconds: float  # what a one-repeat grid spent on it: every stage, the load stage over the repeats stored
    truth: dict[int, Headline]  # stored repeat -> decided over that repeat's windows


@dataclass(frozen=True)
class Reading:
    """One judge of the picks: each candidate's MaxInvocations within the limits and its interval (candidates outside
    the limits are absent), and the best among them."""

    name: str  # "in-sample" or "held-out"
    figures: dict[str, tuple[float, Interval | None]]  # candidate key -> (MaxInvocations, its 95 % interval)

    @property
    def best(self) -> str:
        return max(self.figures, key=lambda k: self.figures[k][0])

    def standing(self, key: str) -> str:
        """'same', 'tied' or 'NOT tied' against this reading's best (a candidate outside the limits: 'NOT tied')."""
        if not self.figures:
            return "no best"
        best = self.best
        if key == best:
            return "same"
        if key not in self.figures:
            return "NOT tied"
        return "tied" if tied(self.figures[key][1], self.figures[best][1]) else "NOT tied"

    def tied_with_best(self) -> int:
        return sum(self.standing(k) in ("same", "tied") for k in self.figures)


@dataclass(frozen=True)
class Grid:
    spec: ExperimentSpec
    rules: Rules
    loads: list[float]  # the plan's levels by load
    level_s: dict[float, float]  # nominal seconds of each level
    run_start_s: float  # a load run's start and stop cost beyond its nominal seconds (stored grid, median)
    stored: dict[str, Stored]  # by candidate key

    @property
    def seconds(self) -> float:
        return sum(s.seconds for s in self.stored.values())

    @property
    def repeats(self) -> list[int]:
        """The stored repeats every candidate has."""
        return sorted(set.intersection(*(set(s.truth) for s in self.stored.values())))

    def in_sample(self, repeat: int) -> Reading:
        """Each candidate decided over the windows of `repeat` (the one the draws come from), window-only intervals."""
        figures = {}
        for key, s in self.stored.items():
            headline = s.truth[repeat]
            if headline.max_invocations is not None:
                figures[key] = (headline.max_invocations, headline.ipm_interval)
        return Reading("in-sample", figures)

    def run_to_run(self) -> tuple[float, int, int]:
        """The relative standard deviation of one repeat's MaxInvocations around its candidate's mean, pooled over the
        candidates within the limits in every stored repeat, its degrees of freedom (0: fewer than 2 repeats) and the
        repeat figures it pools."""
        squares, df, figures = 0.0, 0, 0
        for s in self.stored.values():
            values = [s.truth[r].max_invocations for r in self.repeats]
            known = [v for v in values if v is not None]
            if len(known) < 2 or len(known) < len(values):
                continue
            mean = statistics.mean(known)
            squares += sum((v / mean - 1.0) ** 2 for v in known)
            df, figures = df + len(known) - 1, figures + len(known)
        return (math.sqrt(squares / df), df, figures) if df else (0.0, 0, 0)

    def held_out(self, repeat: int) -> Reading | None:
        """Each candidate's mean MaxInvocations over the repeats other than `repeat`, its interval from the pooled
        run-to-run variance (t(0.975, df) x sd / sqrt(repeats held out), relative); None with 1 stored repeat."""
        others = [r for r in self.repeats if r != repeat]
        spread, df, pooled = self.run_to_run()
        if not others or df == 0:
            return None
        half = t_quantile_95(df) * spread / math.sqrt(len(others))
        figures: dict[str, tuple[float, Interval | None]] = {}
        for key, s in self.stored.items():
            known = [v for r in others if (v := s.truth[r].max_invocations) is not None]
            if len(known) < len(others):
                continue  # outside the limits in a held-out repeat
            mean = statistics.mean(known)
            # n: the repeat figures the run-to-run sd pools (over every candidate); the mean is the held-out repeats'
            counts = f"repeat figures pooled for the run-to-run sd (df {df}), mean of {len(known)} held out"
            interval = Interval(mean, mean * (1 - half), mean * (1 + half), pooled, counts)
            figures[key] = (mean, interval)
        return Reading("held-out", figures)


def load_grid(url: str, spec: ExperimentSpec) -> Grid:
    """The stored grid of `spec` (its current protocol), every candidate's every stored repeat decided on its own."""
    store, rules = ResultStore.open(url), Rules.from_spec(spec)
    plan = compile_traffic(spec.traffic)
    level_s = {level.load: level.duration_seconds for level in plan.levels}
    results = {r.key: r for r in store.results(spec.name, store.current_protocols(spec.name) or "")}
    stored, starts = {}, []
    for candidate in expand_candidates(spec):
        result = results.get(candidate.key)
        if result is None or result.status != RunStatus.OK or result.run_id is None:
            continue  # not measured (or failed): outside the replayed space, said in the output
        stages = (result.server_stats or {}).get("stages", {})
        measured = result.headline.measured if result.headline else Measured()
        windows: dict[int, dict[float, list[WindowRecord]]] = {}
        for record in store.window_records(result.run_id):
            if record.repeat >= spec.traffic.repeats:
                continue  # a further repeat the job's tie-break added (job/tiebreak.py): not the grid's protocol
            windows.setdefault(record.repeat, {}).setdefault(record.load, []).append(record)
        one = dataclasses.replace(measured, repeats=1)
        truth = {
            repeat: decide([w for level in by_load.values() for w in level], one, rules.limits, rules.windows).headline
            for repeat, by_load in windows.items()
        }
        runs = max(1, len(windows))
        load = float(stages.get("load", 0.0))
        starts.append((load - runs * sum(level_s.values())) / runs)
        overhead = sum(float(stages.get(stage, 0.0)) for stage in NOT_LOAD)
        total = sum(float(v) for v in stages.values()) - load + load / runs
        stored[candidate.key] = Stored(candidate, windows, overhead, total, truth)
    run_start = max(0.0, statistics.median(starts)) if starts else 0.0
    return Grid(spec, rules, sorted(level_s), level_s, run_start, stored)


@dataclass
class Outcome:
    pick: str | None  # candidate key
    seconds: float
    deployed: int = 0
    full: int = 0
    pruned_unprobed: int = 0
    pruned: int = 0
    first: tuple[str, float] | None = None  # the first candidate measured in full, and the seconds spent by then


class Replay:
    """Measurements drawn from the stored grid: what a deployment of one candidate would have shown."""

    def __init__(self, grid: Grid, seed: int, probe_seconds: float | None, sample: int | None = None) -> None:
        self.grid, self.random, self.probe_seconds = grid, random.Random(seed), probe_seconds
        repeats = grid.repeats
        self.sample = repeats[seed % len(repeats)] if sample is None else sample  # the stored repeat drawn from

    def draw(self, stored: Stored, load: float, seconds: float, repeat: int, phase: int) -> list[WindowRecord]:
        """The windows a load run of `seconds` at `load` has, drawn from the stored ones."""
        rules = self.grid.rules.windows
        count = max(1, int((seconds - rules.warmup_s) // rules.window_s))
        pool = stored.windows[self.sample].get(load, [])
        return [
            dataclasses.replace(w, repeat=repeat, phase_index=phase, index=i)
            for i, w in enumerate(self.random.choices(pool, k=count) if pool else [])
        ]

    def probe(self, stored: Stored, work: Work) -> tuple[Headline, float]:
        """The load search of a probe on drawn windows (the real LoadSearch), and its seconds."""
        rules, loads = self.grid.rules, self.grid.loads
        seconds = probe_length(rules.windows, work.seconds or self.probe_seconds)
        search, records, spent = LoadSearch(len(loads), work.knee_tolerance, work.capacity_first), [], 0.0
        while (index := search.ask()) is not None:
            level_s = min(seconds, self.grid.level_s[loads[index]])
            drawn = self.draw(stored, loads[index], level_s, 0, index)
            spent += level_s + self.grid.run_start_s
            level = judge_levels(drawn, 1, rules.limits, rules.windows)
            search.tell(index, bool(level) and level[0].meets, level[0].ipm if level else 0.0)
            records += drawn
        return decide(records, Measured(repeats=1), rules.limits, rules.windows).headline, spent

    def at_level(self, stored: Stored, load: float, repeats: int) -> tuple[Headline, float]:
        """`repeats` load runs of the level at `load` (the final measurement), and their seconds."""
        rules, level_s = self.grid.rules, self.grid.level_s[load]
        records = [w for r in range(repeats) for w in self.draw(stored, load, level_s, r, 0)]
        seconds = repeats * (level_s + self.grid.run_start_s)
        return decide(records, Measured(repeats=repeats), rules.limits, rules.windows).headline, seconds


def simulate(strategy, replay: Replay, shape: Callable[[Work], Work] = lambda w: w) -> Outcome:
    """The job's ask / follow / tell loop (job/pipeline.py `_search`) with measurements drawn from the grid."""
    grid, outcome = replay.grid, Outcome(None, 0.0)
    told: dict[str, Headline] = {}
    finals: dict[str, Headline] = {}
    while (work := strategy.ask()) is not None:
        work = shape(work)
        stored = grid.stored[work.candidate.key]
        if work.stage in ("prune", "skip"):
            earlier = told.get(work.candidate.key)
            outcome.pruned += work.stage == "prune"
            outcome.pruned_unprobed += work.stage == "prune" and earlier is None
            status = RunStatus.PRUNED if work.stage == "prune" else RunStatus.SKIPPED
            strategy.tell(work, _result(work.candidate, status, earlier))
            continue
        outcome.deployed += 1
        outcome.seconds += stored.overhead_s
        if work.stage == "final":  # a full measurement on a deployment of its own (after every probe)
            assert work.level is not None
            headline, seconds = replay.at_level(stored, work.level, work.repeats)
            outcome.seconds += seconds
            finals[work.candidate.key] = headline
            outcome.first = outcome.first or (work.candidate.key, outcome.seconds)
            strategy.tell(work, _result(work.candidate, RunStatus.OK, headline))
            continue
        headline, seconds = replay.probe(stored, work)
        outcome.seconds += seconds
        follow = strategy.follow(work, headline)
        if follow is not None:
            assert follow.level is not None
            headline, seconds = replay.at_level(stored, follow.level, follow.repeats)
            outcome.seconds += seconds
            finals[work.candidate.key] = headline
            outcome.first = outcome.first or (work.candidate.key, outcome.seconds)
        told[work.candidate.key] = headline
        strategy.tell(work, _result(work.candidate, RunStatus.OK, headline))
    outcome.full = len(finals)
    meeting = {k: h for k, h in finals.items() if h.max_invocations is not None}
    outcome.pick = max(meeting, key=lambda k: meeting[k].max_invocations or 0.0) if meeting else None
    return outcome


def _result(candidate: Candidate, status: RunStatus, headline: Headline | None) -> CandidateResult:
    return CandidateResult(
        candidate.key, candidate.name, candidate.config(), status, None, headline, None, 1, 0.0, None
    )


def adaptive_spec(spec: ExperimentSpec, final_repeats: int, probe_seconds: float | None, unimodal: bool, eta: int = 3):
    document = spec.model_dump(mode="json")
    document["search"] = {
        "strategy": "adaptive",
        "racing": {"final_repeats": final_repeats, "eta": eta, "margin": 0.1, "probe_seconds": probe_seconds},
        "unimodal": list(UNIMODAL_AXES) if unimodal else [],
    }
    return ExperimentSpec.model_validate(document)


def strategies(
    grid: Grid, final_repeats: int, probe_seconds: float | None, eta: int = 3
) -> dict[str, Callable[[], tuple]]:
    candidates = [s.candidate for s in grid.stored.values()]
    now = adaptive_spec(grid.spec, final_repeats, probe_seconds, unimodal=True, eta=eta)
    before = adaptive_spec(grid.spec, final_repeats, probe_seconds, unimodal=False, eta=eta)

    def bottom_up(work: Work) -> Work:
        return dataclasses.replace(work, capacity_first=False)

    return {
        "adaptive": lambda: (AdaptiveSearch(now, candidates), lambda w: w),
        "adaptive-bottom-up": lambda: (AdaptiveSearch(before, candidates), bottom_up),
    }


def name_of(grid: Grid, key: str | None) -> str:
    if key is None:
        return "(none)"
    c = grid.stored[key].candidate
    delay = f"@{c.dynamic_batching.max_queue_delay_microseconds}us" if c.dynamic_batching else ""
    return f"{c.name}{delay}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--db",
        required=True,
        help="the grid's database: a URL (sqlite:///..., postgresql+psycopg://...) or a .db / .db.xz",
    )
    parser.add_argument("--spec", required=True, type=Path, help="the grid's experiment file (search: grid)")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--final-repeats", type=int, default=3)
    parser.add_argument("--probe-seconds", type=float, default=None, help="default: the product's (warm-up + 1 window)")
    parser.add_argument("--eta", type=int, default=3, help="racing's successive-halving eta (default 3)")
    args = parser.parse_args(argv)
    spec = load_spec(args.spec)
    with tempfile.TemporaryDirectory(prefix="replay-") as scratch:
        grid = load_grid(database_url(args.db, Path(scratch)), spec)
    return report(grid, spec, args)


def database_url(db: str, scratch: Path) -> str:
    """A database URL as given, or a path to a SQLite file (.db, or .db.xz decompressed into `scratch`)."""
    if "://" in db:
        return db
    path = Path(db)
    if path.suffix == ".xz":
        target = scratch / path.stem
        with lzma.open(path) as packed, open(target, "wb") as out:
            shutil.copyfileobj(packed, out)
        path = target
    return f"sqlite:///{path.resolve()}"


def report(grid: Grid, spec: ExperimentSpec, args: argparse.Namespace) -> int:
    missing = len(expand_candidates(spec)) - len(grid.stored)
    print(
        f"stored grid: {len(grid.stored)} candidates ({missing} not measured ok, left out), {len(grid.repeats)} "
        f"repeat(s); {grid.seconds:,.0f} s (a one-repeat grid, all stages: the reference); levels {grid.loads}; "
        f"load-run start cost {grid.run_start_s:.2f} s"
    )
    spread, df, _ = grid.run_to_run()
    if df:
        print(f"run to run: one repeat's MaxInvocations varies by {spread:.1%} (relative sd, pooled, df {df})")
    readings: dict[int, tuple[Reading, Reading | None]] = {}
    for repeat in grid.repeats:
        readings[repeat] = (grid.in_sample(repeat), grid.held_out(repeat))
        for reading in readings[repeat]:
            if reading is None:
                print(f"drawn from repeat {repeat}, held-out: n/a (one stored repeat: store the grid with repeats 2)")
                continue
            if not reading.figures:
                print(f"drawn from repeat {repeat}, {reading.name}: no candidate within the limits")
                continue
            best = reading.best
            figure, interval = reading.figures[best]
            print(
                f"drawn from repeat {repeat}, {reading.name}: best {name_of(grid, best)} {figure:,.0f} IPM "
                f"{_bounds(interval)}; tied with it: {reading.tied_with_best()} of {len(grid.stored)} candidates"
            )
    for label, make in strategies(grid, args.final_repeats, args.probe_seconds, args.eta).items():
        rows = []
        for seed in range(args.seeds):
            strategy, shape = make()
            replay = Replay(grid, seed, args.probe_seconds)
            outcome = simulate(strategy, replay, shape)
            judges = readings[replay.sample]
            rows.append((outcome, judges))
            print(
                f"  {label} seed {seed:2d} (repeat {replay.sample}): {outcome.seconds:7,.0f} s "
                f"({outcome.seconds / grid.seconds:5.1%} of the grid), deployed {outcome.deployed}, full {outcome.full}"
                f", pruned unprobed {outcome.pruned_unprobed}, pick {name_of(grid, outcome.pick)}: "
                + ", ".join(f"{r.name} {_standing(r, outcome.pick)}" for r in judges if r is not None)
            )
        share = max(o.seconds for o, _ in rows) / grid.seconds
        mean_share = statistics.mean(o.seconds for o, _ in rows) / grid.seconds
        within = sum(o.seconds <= 0.10 * grid.seconds for o, _ in rows)
        print(
            f"{label}: simulated time {mean_share:.1%} of the grid's on average, {share:.1%} at most (target <= 10 %); "
            f"within 10 % in {within} of {len(rows)} seeds"
        )
        for index, name in enumerate(("in-sample", "held-out")):
            judged = [(o, r) for o, judges in rows if (r := judges[index]) is not None]
            if not judged:
                continue
            good = [_good(r, o.pick) for o, r in judged]
            both = sum(g and o.seconds <= 0.10 * grid.seconds for g, (o, _) in zip(good, judged, strict=True))
            print(
                f"{label}, {name}: pick same as or tied with the best in {sum(good)} of {len(judged)} seeds "
                f"(target >= 19 of 20), tied and within 10 % in {both}"
            )
            firsts = [(o.first, r) for o, r in judged if o.first is not None]
            if firsts:
                tied_first = sum(_good(r, key) for (key, _), r in firsts)
                at = [seconds / grid.seconds for (_, seconds), _ in firsts]
                print(
                    f"{label}, {name}: its first full measurement was same as or tied with the best in {tied_first} "
                    f"of {len(judged)} seeds, after {statistics.mean(at):.1%} of the grid's time on average "
                    f"({max(at):.1%} at most); the full measurements after it decide among candidates within reach"
                )
    return 0


def _bounds(interval: Interval | None) -> str:
    return "[n/a]" if interval is None else f"[{interval.low:,.0f}, {interval.high:,.0f}] ({interval.label})"


def _standing(reading: Reading, key: str | None) -> str:
    return reading.standing(key) if key is not None else "no pick"


def _good(reading: Reading, key: str | None) -> bool:
    return _standing(reading, key) in ("same", "tied")


if __name__ == "__main__":
    sys.exit(main())
