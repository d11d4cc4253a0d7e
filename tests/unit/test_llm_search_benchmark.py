"""benchmarks/llm_search.py's own rules on recorded shapes: the pick is the highest goodput within the SLOs (not the
most requests), a candidate's engine settings come back from its stored configuration, the smoke test's experiment."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import llm_search

from recommender.candidates import LLAMACPP, CandidateResult, expand_candidates
from recommender.metrics.generation import GenerationFigure, GenerationFigures
from recommender.metrics.headline import Headline
from recommender.spec import load_spec
from recommender.spec.llamacpp import DEFAULT, LlamaCppSettings


def result(name: str, requests: float | None, goodput: float, status: str = "ok", **engine) -> CandidateResult:
    figures = GenerationFigures({"goodput": GenerationFigure(goodput)})
    headline = Headline(max_invocations=requests, generation=figures)
    config = {"engine": json.dumps({"protocol": "openai-chat", "variant": name, "kv_cache_gib": 2.0, **engine})}
    return CandidateResult(name, name, config, status, None, headline, None, 1, 1.0, None)


def test_the_pick_is_the_most_goodput_within_the_slos_among_those_measured_in_full():
    results = {
        "many": result("many", 900.0, 5.0),  # the most requests, fewer within the SLOs
        "good": result("good", 600.0, 8.0),
        "pruned": result("pruned", 600.0, 20.0, status="pruned"),  # a probe's figure is not a pick
        "none": result("none", None, 0.0),  # no level met the SLOs
    }
    assert llm_search.pick(results).name == "good"
    assert llm_search.objective(results["good"]) == 480.0 and llm_search.objective(results["none"]) is None


def test_a_candidates_engine_settings_are_its_engine_arguments_and_kv_cache():
    chosen = result("seqs4-chunk", 600.0, 8.0, max_num_seqs=4, enable_chunked_prefill=True)
    assert llm_search.engine_settings(chosen) == ({"max_num_seqs": 4, "enable_chunked_prefill": True}, 2.0)


def test_the_benchmark_runs_the_shipped_experiment_and_the_smoke_test_a_smaller_one(tmp_path):
    shipped = yaml.safe_load(llm_search.EXPERIMENT.read_text())
    full = llm_search.experiment(shipped, quick=False)
    assert full["targets"] == shipped["targets"] and "budget" not in full["search"]
    assert full["decision"] == {"max_extra_seconds": 0}  # timed on the search alone: no tie-break after it
    assert [t["kind"] for t in llm_search.targets(full)] == ["vllm", "llamacpp"]  # both stacks
    assert 12 <= len(expand_candidates(load_spec(llm_search.EXPERIMENT))) <= 24  # the space
    assert llm_search.targets(full)[1]["llamacpp"]["threads"] == [1, 2]  # the threads cliff is in the space
    quick = llm_search.experiment(shipped, quick=True)
    vllm, llamacpp = llm_search.targets(quick)
    assert vllm["engine_args"] == {"max_num_seqs": [2, 4]} and quick["slo"] == shipped["slo"]
    assert llamacpp["llamacpp"] == {"gguf_types": ["f32"], "parallel": [2], "threads": [1]}
    assert len(expand_candidates(load_spec(llm_search.write(tmp_path, quick, "quick")))) == 4
    chosen = result("seqs4", 600.0, 8.0, max_num_seqs=4)
    chosen.config["target"] = "vllm"  # the vllm target's candidate (its label: the target's name)
    path = llm_search.write(tmp_path, quick, "one", strategy="grid", candidate=chosen)
    written = yaml.safe_load(path.read_text())
    assert written["name"] == "one" and written["search"]["strategy"] == "grid" and "targets" not in written
    assert written["target"]["engine_args"] == {"max_num_seqs": 4} and written["target"]["kind"] == "vllm"
    assert written["target"]["kv_cache_gib"] == 2.0 and shipped["targets"][0]["engine_args"] != {}
    assert len(expand_candidates(load_spec(path))) == 1


def test_a_llamacpp_pick_is_written_as_its_target_alone_with_its_settings():
    shipped = yaml.safe_load(llm_search.EXPERIMENT.read_text())
    settings = LlamaCppSettings("q8_0", parallel=8, threads=2)
    config = {"optimization": LLAMACPP, "target": "llamacpp", "engine": settings.engine("openai-chat")}
    picked = CandidateResult("llamacpp-q8_0", "k", config, "ok", None, None, None, 1, 1.0, None)
    assert not llm_search.is_default(picked)
    target = llm_search.one_configuration(shipped, picked)
    assert target["kind"] == "llamacpp" and target["name"] == "llamacpp"
    assert target["llamacpp"] == {
        "gguf_types": ["q8_0"],
        "parallel": [8],
        "batch": [2048],
        "ubatch": [512],
        "threads": [2],
        "continuous_batching": [True],
        "repack": [False],
        "kv_cache": [None],
        "flash_attn": [None],
    }


def test_a_pick_is_set_against_the_default_on_the_rounds_that_measured_both_within_the_slos():
    line = llm_search.over_default("adaptive pick", "vllm-seqs8", [300.0, None, 330.0], [200.0, 210.0, 220.0])
    assert "1.50x" in line and "mean of 2 paired rounds" in line  # (300+330)/2 over (200+220)/2; round 2 left out
    assert "no round" in llm_search.over_default("grid best", "x", [None, 1.0], [5.0, None])


def test_the_gate_is_reported_for_every_candidate_with_its_status():
    refused = result("bf16", 600.0, 8.0, status="incorrect")
    rows = llm_search.gate_rows({"a": result("f32", 600.0, 8.0), "b": refused})
    assert len(rows) == 4 and "| bf16 | incorrect |" in rows[2] and "| f32 | ok |" in rows[3]


def test_a_finished_runs_wall_time_is_the_one_it_kept_else_its_log_less_its_file(tmp_path):
    spec, log = tmp_path / "llm-grid.yaml", tmp_path / "llm-grid-1.log"
    spec.write_text("name: x\n")
    log.write_text("done\n")
    os.utime(spec, (1000.0, 1000.0))
    os.utime(log, (1000.0, 1250.5))
    assert llm_search.recorded_wall(spec, log) == 250.5  # a run from before .wall files
    (tmp_path / "llm-grid-1.wall").write_text("251.25\n")
    assert llm_search.recorded_wall(spec, log) == 251.25


def test_an_engine_default_the_grid_did_not_measure_is_written_as_llama_servers_own_settings(tmp_path):
    """A grid run from before llama.cpp's default was a candidate: the paired run measures it anyway, on the grid
    best's target and wire, every flag left to llama-server; the grid's own run of it is taken when it has one."""
    shipped = yaml.safe_load(llm_search.EXPERIMENT.read_text())
    settings = LlamaCppSettings("q8_0", parallel=8, threads=2)
    config = {"optimization": LLAMACPP, "target": "llamacpp", "engine": settings.engine("openai-chat")}
    best = CandidateResult("llamacpp-q8_0", "k", config, "ok", None, None, None, 1, 1.0, None)
    stand_in = llm_search.engine_default({"k": best}, best)
    assert isinstance(stand_in, llm_search.NotInTheGrid) and llm_search.is_default(stand_in)
    path = llm_search.write(tmp_path, shipped, "default", strategy="grid", candidate=stand_in, repeats=1)
    (candidate,) = expand_candidates(load_spec(path))
    assert candidate.name == "llamacpp-default"
    assert LlamaCppSettings.from_engine(candidate.config()["engine"]) == DEFAULT
    measured = CandidateResult("llamacpp-default", "d", stand_in.config, "ok", None, None, None, 1, 1.0, None)
    assert llm_search.engine_default({"k": best, "d": measured}, best) is measured


def test_aiperf_searches_the_picks_the_engines_default_and_the_named_candidates_each_once():
    """AIPerf tunes the load of a server as it comes: its search on the engine's default is the baseline for what
    tuning the server adds; a named candidate of the grid's run is searched too, an unknown name said in its row."""
    settings = LlamaCppSettings("q8_0", parallel=8, threads=2)
    config = {"optimization": LLAMACPP, "target": "llamacpp", "engine": settings.engine("openai-chat")}
    best = CandidateResult("k", "llamacpp-q8_0@llamacpp", config, "ok", None, result("b", 600.0, 9.0).headline, None,
                           1, 1.0, None)  # fmt: skip
    twin = CandidateResult("t", "llamacpp-q8_0-t1@llamacpp", config, "ok", None, result("t", 600.0, 5.0).headline,
                           None, 1, 1.0, None)  # fmt: skip
    grid = llm_search.Search("grid", 10.0, {"k": best, "t": twin})
    adaptive = llm_search.Search("adaptive", 2.0, {"k": best})  # the same pick: searched once
    targets = llm_search.aiperf_targets(grid, adaptive, ["llamacpp-q8_0-t1", "missing"])
    assert [(label, r.name if r else None) for label, r in targets] == [
        ("grid best", "llamacpp-q8_0@llamacpp"),
        ("engine default", "llamacpp-default (not in the grid's run)"),
        ("llamacpp-q8_0-t1", "llamacpp-q8_0-t1@llamacpp"),
        ("missing", None),
    ]
    assert "failed: not a candidate of the grid's run" in llm_search.aiperf_row({}, "missing", None, Path("."))


def test_reuse_reads_a_paired_runs_finished_rounds_and_runs_only_the_rest(tmp_path, monkeypatch):
    """A benchmark stopped part way, or given a further --runs, goes on: a round whose run finished (its .wall file,
    written only then) is read from its database; a round that failed or never ran is run."""
    settings = LlamaCppSettings("q8_0", parallel=8, threads=2)
    config = {"optimization": LLAMACPP, "target": "llamacpp", "engine": settings.engine("openai-chat")}
    best = CandidateResult("llamacpp-q8_0", "k", config, "ok", None, None, None, 1, 1.0, None)
    shipped = yaml.safe_load(llm_search.EXPERIMENT.read_text())
    ran: list[str] = []

    def run_once(folder: Path, spec: Path, number: int) -> tuple[float, str]:
        ran.append(f"{spec.stem}-{number}")
        return 1.0, f"sqlite:///ran/{spec.stem}-{number}.db"

    monkeypatch.setattr(llm_search, "run_once", run_once)
    monkeypatch.setattr(llm_search, "decided", lambda url, path: {"k": result("x", 60.0, 1.0 if "ran" in url else 2.0)})
    (tmp_path / "run1-grid-best-1.wall").write_text("85.0\n")  # round 1 finished; round 2 only left its log
    (tmp_path / "run1-grid-best-2.log").write_text("failed\n")
    figures = llm_search.paired_picks(tmp_path, shipped, {"grid best": best}, 2, "run1", reuse=True)
    assert ran == ["run1-grid-best-2"]
    assert figures == {"grid best": [120.0, 60.0]}  # goodput/s as good requests/min: read, then run
    ran.clear()
    llm_search.paired_picks(tmp_path, shipped, {"grid best": best}, 2, "run1")
    assert ran == ["run1-grid-best-1", "run1-grid-best-2"]  # without reuse every round runs


def test_across_the_runs_a_pick_counts_as_found_when_same_tied_or_above_and_the_largest_ratio_is_judged():
    runs = [
        (0.20, "same"),
        (0.31, "tied: paired difference -20 good requests/min [-90, +50] (95 %, 5 rounds)"),
        (0.25, "NOT tied (below): paired difference -645 good requests/min [-825, -465] (95 %, 5 rounds)"),
        (0.22, "NOT tied (above): paired difference +90 good requests/min [+10, +170] (95 %, 5 rounds)"),
    ]
    lines = llm_search.across_runs(runs)
    assert "in 3 of 4 runs (target: every run)" in lines[2]
    assert lines[3] == "- wall time adaptive / grid per run: 0.20, 0.31, 0.25, 0.22; the largest 0.31 (target <= 0.30)"
