"""The ranking view `run` and `rank` print: the recommendation's order, columns that fit, cards, no cut figure."""

from __future__ import annotations

import re
from dataclasses import replace

import pytest
from rich.console import Console

from recommender.candidates import CandidateResult
from recommender.cli.tables import COLUMNS, print_decision, ranking_view
from recommender.decide.recommendation import recommend
from recommender.metrics.headline import Headline, WindowCount
from recommender.metrics.intervals import Interval
from recommender.metrics.payload_lengths import payload_lengths
from recommender.spec import ExperimentSpec

SPEC = ExperimentSpec.model_validate(
    {"name": "t", "target": {"instance_type": "local-cpu"}, "latency_threshold": {"percentile": "p95", "ms": 500}}
)
CONFIG = {"optimization": "pt", "dynamic_batching": None, "instance_count": 1, "max_batch_size": 4}
SERVER = {
    "avg_batch_size": 1.0,
    "at_max_invocations": {
        "queue_us": 100.0,
        "compute_input_us": 10.0,
        "compute_infer_us": 900.0,
        "compute_output_us": 5.0,
    },
}


def result(
    name: str, ipm: float, interval: tuple[float, float] | None, latency: float = 12.5, stop: str | None = None
) -> CandidateResult:
    headline = Headline(
        invocations_per_minute=ipm,
        max_invocations=ipm,
        model_latency_ms=latency,
        latency_ms={"p95": latency},
        within_threshold=latency <= 500,
        stable=interval is not None,
        stop_reason=stop,
        samples=240,
        requests=300,
        windows=WindowCount(measured=12, at_level=12),
        repeats=3 if interval else 1,
        ipm_interval=Interval(ipm, *interval, 3) if interval else None,
        latency_interval=Interval(latency, latency - 1, latency + 1, 3) if interval else None,
    )
    sent = payload_lengths("f" * 16, "queries.txt", [6, 18]).to_dict()  # 12 input tokens per request on average
    return CandidateResult("k" + name, name, CONFIG, "ok", None, headline, SERVER, 1, 10.0, None, payload=sent)


def rendered(results: list[CandidateResult], width: int, terminal: bool) -> str:
    # a height too: rich takes a width alone as 80 columns under TERM=dumb (a CI log, an editor's shell)
    console = Console(record=True, width=width, height=50, force_terminal=terminal, color_system=None)
    console.print(ranking_view(recommend(results, SPEC), results, console))
    return console.export_text()


def line_of(text: str, name: str) -> str:
    return next(line for line in text.splitlines() if re.search(rf"\b{re.escape(name)}\b", line))


STUDY = [
    result("alpha", 1000, (950, 1050)),
    result("bravo", 980, (940, 1020), stop="latency: p95 above"),
    result("charlie", 700, (690, 710)),
    result("delta", 900, (880, 920), latency=620.0),
]


def test_wide_terminal_shows_every_column_in_the_ranking_order() -> None:
    text = rendered(STUDY, 280, terminal=True)
    assert all(column.label.format(p="p95").split()[0] in text for column in COLUMNS if "embedding" in column.kinds)
    alpha, bravo, charlie = (line_of(text, n) for n in ("alpha", "bravo", "charlie"))
    assert re.search(r"│\s+200\s+│", alpha)  # input tokens/s: 1,000/min / 60 x 12 tokens per request
    assert "1,000 ± 50" in alpha and "n=3 repeats" in alpha and "12 win, 240 req" in alpha and "0.1 / 0.9" in alpha
    assert "recommended" in alpha and "0 of 3" in alpha
    assert "tied with #1" in bravo and "latency" in bravo
    assert "-30% vs #1" in charlie
    assert text.index("alpha") < text.index("bravo") < text.index("charlie") < text.index("delta")
    assert "excluded: status is over" in line_of(text, "delta")  # the verdict is text: it may wrap, a figure never


@pytest.mark.parametrize("width", [80, 100, 120])
def test_narrow_terminal_drops_columns_and_never_cuts_a_figure(width: int) -> None:
    text = rendered(STUDY, width, terminal=True)
    table_lines = [line.rstrip() for line in text.splitlines()[1:] if line.strip()]
    assert all(line[-1] in "┓┃┫┩│┘" for line in table_lines), text  # closed on the right: nothing cropped
    assert max(len(line) for line in text.splitlines()) <= width
    assert "…" not in text and "..." not in text
    for figure in ("1,000 ± 50", "980 ± 40", "700 ± 10", "12.5"):
        assert figure in text
    assert "rank" in text and "verdict" in text and "recommended" in text and "tied with #1" in text


def test_not_a_terminal_prints_one_card_per_candidate_with_every_field() -> None:
    text = rendered(STUDY, 80, terminal=False)
    assert "│" not in text and "┃" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.splitlines()[0] == "#1 alpha: recommended"
    card = text[text.index("#1 alpha") : text.index("#2 ")]
    for field in (
        "MaxInvocations/min 1,000 ± 50",
        "p95 ms 12.5",
        "p95 mean over 12 win, 240 req",  # a mean of window p95s, not one p95 of n requests
        "± over n=3 repeats",
        "breached 0 of 3",
        "queue / compute ms 0.1 / 0.9",
        "avg batch 1.00",
        "stable yes",
        "stopped end of traffic",
        "errors 0.00%",
    ):
        assert field in card


def test_one_repeat_claims_no_difference() -> None:
    text = rendered([result("alpha", 1000, None), result("bravo", 900, None)], 200, terminal=False)
    assert "#2 bravo: no noise estimate (repeats: 1)" in text and "-10%" not in text


def test_a_reason_is_printed_as_text_never_as_markup() -> None:
    failed = CandidateResult(
        "kx", "xray", CONFIG, "failed", "exited: [bold]<b>boom</b>[/bold]", None, None, 2, 1.0, None
    )
    text = rendered([result("alpha", 1000, None), failed], 200, terminal=False)
    assert "[bold]<b>boom</b>[/bold]" in text


def test_print_decision_adds_the_legend_and_the_recommendation_in_words() -> None:
    console = Console(record=True, width=80, force_terminal=False)
    print_decision(console, recommend(STUDY, SPEC), STUDY)
    text = " ".join(console.export_text().split())
    assert "configuration pt-db-ig2-mbs8 =" in text and "recommendation (weights" in text
    assert "alpha sustains 1,000 invocations per minute" in text


def test_a_multi_target_ranking_shows_the_instance_type_and_prices_each_candidate_as_its_own() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "t",
            "latency_threshold": {"percentile": "p95", "ms": 500},
            "targets": [{"instance_type": f"ml.g4dn.{s}", "priced_as": f"ml.g4dn.{s}"} for s in ("xlarge", "12xlarge")],
        }
    )
    small, big = result("pt-small", 1000, (950, 1050)), result("pt-big", 1100, (1050, 1150))
    small = small.__class__(
        **{**small.__dict__, "config": CONFIG | {"instance_type": "ml.g4dn.xlarge", "target": "ml.g4dn.xlarge"}}
    )
    big = big.__class__(
        **{**big.__dict__, "config": CONFIG | {"instance_type": "ml.g4dn.12xlarge", "target": "ml.g4dn.12xlarge"}}
    )
    rec = recommend([small, big], spec)
    assert rec.pricing_of(small.key).price_per_hour < rec.pricing_of(big.key).price_per_hour
    assert rec.winner.candidate.name == "pt-small"  # nearly the same throughput at a fraction of the price
    console = Console(record=True, width=250, height=50, force_terminal=True, color_system=None)
    console.print(ranking_view(rec, [small, big], console))
    text = console.export_text()
    assert "instance type" in text and "ml.g4dn.12xlarge" in line_of(text, "pt-big")
    single = rendered(STUDY, 250, terminal=True)
    assert "instance type" not in single  # one target: no column


def test_the_max_invocations_column_is_max_invocations_and_vs_best_is_the_rankings() -> None:
    """Repeats with different window counts: the pooled window mean (MaxInvocations, 1,067) is not the mean of the
    per-repeat means (the interval's centre, 1,100); the table prints MaxInvocations, as the ranking and report do,
    and its "vs #1" is the ranking's own comparison on those figures."""
    best = result("alpha", 1067, (1000, 1200))
    best = CandidateResult(
        **{**best.__dict__, "headline": replace(best.headline, ipm_interval=Interval(1100, 1000, 1200, 3))}
    )
    other = result("charlie", 700, (690, 710))
    text = rendered([best, other], 250, terminal=True)
    assert "1,067 (1,000 to 1,200)" in line_of(text, "alpha")  # the interval is not centred on it: no ±
    rec = recommend([best, other], SPEC)
    throughput = rec.ranking.ranked[1].versus.metric("throughput")
    assert f"{throughput.relative:+.0%} vs #1" in line_of(text, "charlie") and round(throughput.relative, 2) == -0.34


@pytest.mark.parametrize("width", [100, 120, 160])
def test_the_highest_priority_numbers_are_dropped_first(width: int) -> None:
    """Every column dropped has a priority number at least as high as every column kept (1s are never dropped)."""
    results = STUDY
    console = Console(record=True, width=width, height=50, force_terminal=True, color_system=None)
    table = ranking_view(recommend(results, SPEC), results, console)
    kept = {str(column.header) for column in table.columns}
    priority = {c.label.format(p="p95"): c.priority for c in COLUMNS if "embedding" in c.kinds}
    dropped = set(priority) - kept
    assert dropped and {label for label, p in priority.items() if p == 1} <= kept
    assert max(priority[label] for label in kept if label in priority) <= min(priority[label] for label in dropped)
    assert "unstable because" in dropped  # priority 6: the first to go


def test_a_run_measured_from_the_top_says_where_its_walk_stopped() -> None:
    top = result("alpha", 1000, (950, 1050))
    top = replace(top, headline=replace(top.headline, from_top_stop=4.0))
    text = rendered([top, result("bravo", 900, (850, 950))], 200, terminal=False)
    assert "stopped from the top down to load 4" in text[: text.index("#2 ")]
    assert "stopped end of traffic" in text[text.index("#2 ") :]


def test_a_level_ended_because_it_was_known_says_so() -> None:
    known = result("alpha", 1000, (950, 1050))
    known = replace(known, headline=replace(known.headline, phase_index=1, known_levels=(0, 1)))
    other = result("bravo", 900, (850, 950))
    other = replace(other, headline=replace(other.headline, phase_index=1, known_levels=(0,)))  # its last ran out
    text = rendered([known, other], 200, terminal=False)
    assert "stopped known (precision reached)" in text[: text.index("#2 ")]
    assert "stopped end of traffic" in text[text.index("#2 ") :]


def test_the_legend_explains_variant_names_only_where_a_candidate_is_named_so() -> None:
    endpoint = replace(result("openai-endpoint", 1000, (950, 1050)), config={"optimization": "openai-endpoint"})
    console = Console(record=True, width=80, force_terminal=False)
    print_decision(console, recommend([endpoint], SPEC), [endpoint])
    text = " ".join(console.export_text().split())
    assert "pt-db-ig2-mbs8" not in text and "MaxInvocations: mean invocations/min" in text


def test_a_window_interval_shows_its_effective_n() -> None:
    windows = result("alpha", 1000, (900, 1100))
    interval = Interval(1000, 900, 1100, 12, "windows", lag1=0.31, n_eff=4.2)
    windows = replace(windows, headline=replace(windows.headline, ipm_interval=interval, repeats=1))
    text = rendered([windows], 200, terminal=False)
    assert "± over n=12 windows (effective 4.2)" in text


@pytest.mark.parametrize(("padding", "explained"), [("none", True), ("max", False)])
def test_the_legend_explains_a_padding_suffix_only_where_a_candidate_has_one(padding: str, explained: bool) -> None:
    named = f"pt-db-ig1-mbs8{'' if padding == 'max' else '-' + padding}"
    candidate = replace(result(named, 1000, (950, 1050)), config={"optimization": "pt", "padding": padding})
    console = Console(record=True, width=80, force_terminal=False)
    print_decision(console, recommend([candidate], SPEC), [candidate])
    text = " ".join(console.export_text().split())
    assert ("-none (each request at its own length)" in text) == explained
