"""A window's generation figures (TTFT, ITL, tokens/s, kept requests), stored per window and decided per level
under SLO terms: the meeting level, goodput and the figures at it with their intervals."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from recommender.metrics.generation import KEPT_REQUESTS, WindowGeneration, window_generation
from recommender.metrics.headline import Headline, Measured
from recommender.metrics.levels import WindowRecord, decide
from recommender.metrics.limits import Limits, SloTerm
from recommender.metrics.records import RequestLog
from recommender.metrics.rules import Rules
from recommender.metrics.steady import measure_windows


def generative_log(
    t_s: list[float], ttft_ms: list[float], e2e_ms: list[float], tokens: list[int], ok: list[bool] | None = None
) -> RequestLog:
    """Requests sent at `t_s`, each streaming `tokens` chunks evenly from its TTFT to its end."""
    n = len(t_s)
    chunks = [
        np.linspace(f * 1000, e * 1000, k).astype(np.int64) for f, e, k in zip(ttft_ms, e2e_ms, tokens, strict=True)
    ]
    counts = np.array(tokens)
    return RequestLog(
        t_s=np.array(t_s, dtype=float),
        latency_us=(np.array(e2e_ms) * 1000).astype(np.int64),
        ok=np.ones(n, bool) if ok is None else np.array(ok),
        users=np.ones(n, np.int32),
        ttft_us=(np.array(ttft_ms) * 1000).astype(np.int64),
        input_tokens=np.full(n, 10),
        output_tokens=counts,
        tokens_counted=np.zeros(n, bool),
        finished=np.ones(n, bool),
        chunk_start=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
        chunk_count=counts,
        chunk_us=np.concatenate(chunks) if chunks else np.empty(0),
    )


def test_window_figures_by_hand() -> None:
    """Four requests completed in [0, 2): TTFT 10/20/30/40 ms, end-to-end 110..140 ms, 11/11/21/1 tokens; a failed
    one and one completing after the window are left out."""
    log = generative_log(
        [0.0, 0.1, 0.2, 0.3, 0.4, 1.95],
        [10, 20, 30, 40, 5, 10],
        [110, 120, 130, 140, 50, 100],
        [11, 11, 21, 1, 3, 5],
        ok=[True, True, True, True, False, True],
    )
    g = window_generation(log, 0.0, 2.0)
    assert g is not None
    assert (g.requests, g.output_tokens, g.input_tokens) == (4, 44, 40)
    assert g.output_tps == 22.0 and g.request_throughput == 2.0
    assert g.ttft_ms["p50"] == 20.0
    # ITL per request: 100 / 10, 100 / 10, 100 / 20 ms; the one-token request has none
    assert g.kept.itl_ms == (10.0, 10.0, 5.0, None)
    # per user: the tokens after the first over their seconds, summed (10 + 10 + 20 over 0.3 s; the one-token
    # request has no decode): 1 / the token-weighted ITL, not a mean of per-request rates
    assert g.per_user_tps == pytest.approx(40 / 0.3)
    assert g.kept.e2e_ms == (110.0, 120.0, 130.0, 140.0)


def test_goodput_counts_the_requests_within_every_term() -> None:
    g = window_generation(
        generative_log([0.0, 0.1, 0.2, 0.3], [10, 20, 30, 40], [110, 120, 130, 140], [11, 11, 21, 1]), 0.0, 2.0
    )
    assert g is not None
    assert g.goodput(()) == 2.0  # no term: every successful request is good
    assert g.goodput((SloTerm("ttft", "p95", 25.0),)) == 1.0  # two of four
    assert g.goodput((SloTerm("ttft", "p95", 35.0), SloTerm("itl", "p95", 6.0))) == 0.5  # only the third
    assert g.goodput((SloTerm("e2e", "p95", 100.0),)) == 0.0


def test_a_busy_window_keeps_a_bounded_even_sample() -> None:
    n = 3 * KEPT_REQUESTS
    t = list(np.linspace(0, 0.9, n))
    ttft = [float(i % 100) for i in range(n)]  # a request's TTFT is its index mod 100 ms
    g = window_generation(generative_log(t, ttft, [200.0] * n, [5] * n), 0.0, 2.0)
    assert g is not None and g.requests == n and len(g.kept.ttft_ms) == KEPT_REQUESTS
    # half the requests have TTFT < 50 ms: the even sample says so within a few per cent
    assert g.goodput((SloTerm("ttft", "p50", 49.5),)) == pytest.approx(n / 2 / 2.0, rel=0.02)


def test_a_request_that_streamed_no_token_is_not_counted_as_generated() -> None:
    log = generative_log([0.0, 0.1], [10, 20], [110, 120], [11, 1])
    log = RequestLog(**{**{k: getattr(log, k) for k in log.__dataclass_fields__}, "ttft_us": np.array([10_000, -1])})
    g = window_generation(log, 0.0, 1.0)
    assert g is not None and (g.requests, g.output_tokens, g.kept.ttft_ms) == (1, 11, (10.0,))


def test_an_embedding_log_has_no_generation_figures() -> None:
    plain = RequestLog(np.zeros(3), np.full(3, 1000), np.ones(3, bool), np.ones(3))
    assert window_generation(plain, 0.0, 1.0) is None


def test_window_generation_round_trips_as_json() -> None:
    g = window_generation(generative_log([0.0, 0.1], [10, 20], [110, 120], [11, 1]), 0.0, 1.0)
    assert g is not None and WindowGeneration.from_dict(g.to_dict()) == g
    assert WindowGeneration.from_dict(None) is None


def two_levels(itl_ms_at_high: float) -> list[WindowRecord]:
    """Two levels of four 1-s windows: load 1 (ITL about 5 ms, 10 tokens a request, 20 requests a window) and load 4
    (ITL about `itl_ms_at_high`, 40 requests a window); TTFT 20 ms, end-to-end under 500 ms everywhere."""
    t, ttft, e2e, spans = [], [], [], []
    for phase, (requests, itl) in enumerate([(20, 5.0), (40, itl_ms_at_high)]):
        for k in range(4):
            start = phase * 10 + k
            spans.append((phase, float(start), float(start + 1)))
            t += list(np.linspace(start, start + 0.5, requests))
            ttft += [20.0] * requests
            e2e += [20 + 9 * itl + k * 0.1] * requests
    log = generative_log(t, ttft, e2e, [10] * len(t))
    return [WindowRecord.of(0, w) for w in measure_windows(log, spans, [1.0, 4.0], Rules())]


def test_an_itl_slo_picks_the_highest_level_within_it() -> None:
    records = two_levels(itl_ms_at_high=40.0)
    loose = decide(records, Measured(), Limits())
    assert loose.chosen is not None and loose.chosen.load == 4
    strict = decide(records, Measured(), Limits(slo=(SloTerm("itl", "p95", 20.0),)))
    assert strict.chosen is not None and strict.chosen.load == 1
    assert "ITL p95 40.0 ms above the 20 ms SLO" in strict.levels[1].why_not
    g = strict.figures.generation
    assert g is not None
    assert g.value("itl_ms.p95") == pytest.approx(5.0, rel=0.01)
    assert g.value("ttft_ms.p50") == pytest.approx(20.0)
    assert g.value("output_tps") == pytest.approx(200.0)  # 20 requests x 10 tokens a second
    assert g.value("request_throughput") == pytest.approx(20.0)
    assert g.value("goodput") == pytest.approx(20.0)  # every request within every term
    assert g.value("output_tps_per_user") == pytest.approx(9 / 0.045, rel=0.01)  # 1 / ITL (5 ms)
    interval = g.interval("output_tps")
    assert interval is not None and interval.n == 4 and interval.counts == "windows"
    # four identical windows: the interval is still one request (one token) per 1-s window wide, never +- 0
    goodput = g.interval("goodput")
    assert goodput is not None and (goodput.low, goodput.high) == (19.0, 21.0)
    assert (interval.low, interval.high) == (199.0, 201.0)


def test_per_user_speed_at_a_level_pools_its_windows_a_burst_does_not_rule_it() -> None:
    """Output tokens/s per user at a level: the tokens after the first over their decode seconds, summed over the
    level's windows (as within one window), not a mean of window rates. A window whose one answer came in a burst
    (31 tokens within 0.2 ms: a starved reader, as vLLM on 2 cores gave) reads 155,000 tokens/s; a mean of the
    four windows would be ~39,000, the pooled figure stays near the other windows' 200."""
    t: list[float] = []
    ttft: list[float] = []
    e2e: list[float] = []
    tokens: list[int] = []
    spans = []
    for k in range(4):
        spans.append((0, float(k), float(k + 1)))
        if k == 2:  # one request, its 32 tokens within 0.2 ms after the first
            t.append(k + 0.1)
            ttft.append(300.0)
            e2e.append(300.2)
            tokens.append(32)
            continue
        t += list(np.linspace(k, k + 0.5, 20))
        ttft += [20.0] * 20
        e2e += [65.0] * 20  # 9 tokens after the first in 45 ms: 200 tokens/s
        tokens += [10] * 20
    records = [
        WindowRecord.of(0, w) for w in measure_windows(generative_log(t, ttft, e2e, tokens), spans, [1.0], Rules())
    ]
    burst = records[2].generation
    assert burst is not None and burst.per_user_tps == pytest.approx(31 / 0.0002, rel=0.01)
    g = decide(records, Measured(), Limits()).figures.generation
    assert g is not None
    pooled = (3 * 20 * 9 + 31) / (3 * 20 * 0.045 + 0.0002)
    assert g.value("output_tps_per_user") == pytest.approx(pooled, rel=0.001)
    interval = g.interval("output_tps_per_user")
    assert interval is not None and interval.low <= pooled <= interval.high  # about the pooled figure


def test_windows_stored_without_decode_totals_are_still_read_as_their_mean() -> None:
    """Windows stored before the decode totals were kept: the level's per-user speed is their mean, as then."""
    old = [
        WindowRecord.of(0, w)
        for w in measure_windows(
            generative_log(list(np.linspace(0, 3.5, 8)), [20.0] * 8, [65.0] * 4 + [110.0] * 4, [10] * 8),
            [(0, 0.0, 2.0), (0, 2.0, 4.0)],
            [1.0],
            Rules(),
        )
    ]
    stripped = []
    for record in old:
        assert record.generation is not None
        data = record.generation.to_dict()
        del data["decode_tokens"], data["decode_seconds"]
        generation = WindowGeneration.from_dict(data)
        assert generation is not None and generation.decode_seconds is None
        stripped.append(replace(record, generation=generation))
    g = decide(stripped, Measured(), Limits()).figures.generation
    assert g is not None
    assert g.value("output_tps_per_user") == pytest.approx((200.0 + 100.0) / 2)  # pooled would be 133


def test_goodput_at_the_level_follows_the_slo_decided_with() -> None:
    records = two_levels(itl_ms_at_high=40.0)
    tight = decide(records, Measured(), Limits(slo=(SloTerm("itl", "p50", 45.0), SloTerm("ttft", "p95", 10.0))))
    assert tight.chosen is None  # TTFT 20 ms breaches everywhere: the lowest level is shown
    g = tight.figures.generation
    assert g is not None and g.value("goodput") == 0.0 and g.value("request_throughput") == pytest.approx(20.0)


def test_the_headline_keeps_the_generation_figures() -> None:
    decision = decide(two_levels(40.0), Measured(), Limits(slo=(SloTerm("itl", "p95", 20.0),)))
    headline = decision.headline
    assert Headline.from_dict(headline.to_dict()) == headline


def test_limits_with_slo_terms_round_trip() -> None:
    limits = Limits(slo=(SloTerm("ttft", "p95", 500.0), SloTerm("itl", "p99", 50.0)))
    assert Limits.from_dict(limits.to_dict()) == limits
    assert "slo" not in Limits().to_dict()  # the stored shape of limits without terms is unchanged
    assert [t.metric for t in limits.terms] == ["e2e", "ttft", "itl"]
    assert Rules.from_json(Rules(limits).to_json()).limits == limits


def test_the_store_keeps_each_window_s_generation_and_windows_before_0009_read_none(tmp_path) -> None:
    """A generative run's windows are stored with their figures and decided again from the store alike; a database
    at 0008 is migrated in place, its windows reading None."""
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine

    from recommender.candidates import expand_candidates
    from recommender.spec import ExperimentSpec
    from recommender.store.database import MIGRATIONS
    from recommender.store.results import ResultStore
    from tests.unit.test_store import assert_migrated

    url = f"sqlite:///{tmp_path / 'old.db'}"
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with create_engine(url).begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008_payload")
    store = ResultStore.open(url)
    assert_migrated(store.engine)
    spec = ExperimentSpec.model_validate({"name": "llm"})
    candidate = store.save_candidate(store.save_experiment(spec), expand_candidates(spec)[0])
    t, spans = [0.0, 0.1, 0.2], [(0, 0.0, 1.0)]
    log = generative_log(t, [10, 20, 30], [110, 120, 130], [11, 11, 21])
    plain = RequestLog(np.array(t), np.full(3, 1000), np.ones(3, bool), np.ones(3))
    runs = []
    for measured in (log, plain):
        run = store.start_run(candidate, "p", None)
        store.finish_run(run, "ok", windows=[(0, w) for w in measure_windows(measured, spans, [1.0], Rules())])
        runs.append(run)
    (stored,), (stored_plain,) = (store.window_records(run) for run in runs)
    assert stored.generation == window_generation(log, 0.0, 1.0) and stored.generation is not None
    assert stored_plain.generation is None
    limits = Limits(slo=(SloTerm("ttft", "p50", 25.0),))
    assert decide([stored], Measured(), limits).figures.generation.value("goodput") == 2.0


def test_the_experiment_file_s_slo_becomes_limit_terms() -> None:
    from recommender.spec import ExperimentSpec

    spec = ExperimentSpec.model_validate(
        {"name": "llm", "slo": {"ttft_ms": {"p95": 500}, "itl_ms": {"p50": 20, "p99": 50}}}
    )
    assert Limits.from_spec(spec).slo == (
        SloTerm("ttft", "p95", 500.0),
        SloTerm("itl", "p50", 20.0),
        SloTerm("itl", "p99", 50.0),
    )
    assert Limits.from_spec(spec).override(threshold_ms=900).slo == Limits.from_spec(spec).slo


@pytest.mark.parametrize(
    ("slo", "says"),
    [
        ({"ttft_ms": {"p96": 500}}, "slo.ttft_ms.p96"),
        ({"itl_ms": {"p95": 0}}, "p95: the threshold must be above 0 ms"),
        ({"itl_ms": {}}, "give at least one percentile"),
        ({"tpot_ms": {"p95": 3}}, "tpot_ms"),
    ],
)
def test_a_bad_slo_is_refused_naming_the_field(tmp_path, slo, says) -> None:
    import yaml

    from recommender.errors import SpecError
    from recommender.spec import load_spec

    path = tmp_path / "llm.yaml"
    path.write_text(yaml.safe_dump({"name": "llm", "slo": slo}))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: slo.") and says in problem


def test_an_answer_that_came_in_one_burst_does_not_rule_the_per_user_speed() -> None:
    """Nine requests decode at 10 ms a token; one (vLLM on a CPU often does this) arrives whole 1 ms after its first
    chunk. A mean of per-request rates read ~1,000 tok/s per user; the token-weighted figure stays near 100."""
    log = generative_log([0.1 * k for k in range(10)], [20] * 10, [20 + 90] * 9 + [21], [10] * 10)
    g = window_generation(log, 0.0, 2.0)
    assert g is not None and g.per_user_tps == pytest.approx(90 / (9 * 0.09 + 0.001))
