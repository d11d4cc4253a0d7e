"""`recommender plan`: every traffic shape (repeats included), per target with catalog prices, parallel wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from recommender.candidates import expand_candidates
from recommender.cli import build_app
from recommender.decide.budget import BudgetExceeded, RunBudget
from recommender.job.refusals import planned_refusals
from recommender.load.shapes import traffic_seconds
from recommender.search.plan import planned_counts
from recommender.spec import ExperimentSpec

SHAPES = {
    "phases": {"phases": [{"duration_seconds": 30}, {"duration_seconds": 90}]},
    "stairs": {"stairs": {"users_per_step": 2, "number_of_steps": 3, "duration_seconds": 40}},
    "concurrency": {"concurrency": {"users": [1, 4], "duration_seconds": 60}},
    "rate": {"rate": {"requests_per_second": [5, 10, 20], "duration_seconds": 40}},
}
TARGETS = [
    {"instance_type": "ml.g4dn.xlarge", "priced_as": "ml.g4dn.xlarge"},
    {"instance_type": "ml.g4dn.2xlarge", "priced_as": "ml.g4dn.2xlarge"},
]


def plan_json(tmp_path, document: dict) -> dict:
    path = tmp_path / "plan.json"  # JSON is YAML
    path.write_text(json.dumps({"name": "p", "variants": {"dynamic_batching": [False, True]}} | document))
    done = CliRunner().invoke(build_app(), ["plan", str(path), "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout[: done.stdout.rindex("}") + 1])


@pytest.mark.parametrize("shape", sorted(SHAPES))
@pytest.mark.parametrize("repeats", [1, 3])
def test_every_shape_and_repeat_is_planned_per_target_at_catalog_prices(tmp_path, shape, repeats) -> None:
    traffic = SHAPES[shape] | {"repeats": repeats}
    estimate = plan_json(tmp_path, {"targets": TARGETS, "traffic": traffic})
    load_s = traffic_seconds(ExperimentSpec.model_validate({"name": "p", "traffic": traffic}).traffic)
    first, second = estimate["targets"]
    assert (first["candidates"], second["candidates"]) == (2, 2)
    assert first["minutes_per_candidate"] == pytest.approx(load_s / 60 + 0.5)  # the load plus a local server start
    assert 0 < first["price_per_hour"] < second["price_per_hour"]  # the catalog's g4dn.xlarge, then 2xlarge
    hours = [2 * t["minutes_per_candidate"] / 60 for t in (first, second)]
    assert estimate["estimated_usd"] == pytest.approx(
        hours[0] * first["price_per_hour"] + hours[1] * second["price_per_hour"]
    )
    assert estimate["minutes"] == pytest.approx(4 * first["minutes_per_candidate"])  # local targets: one at a time


def test_parallel_cloud_targets_divide_the_wall_time(tmp_path) -> None:
    sagemaker = {
        "kind": "sagemaker",
        "role_arn": "arn:aws:iam::123456789012:role/R",
        "bucket": "b",
        "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r:1",
    }
    targets = [sagemaker | {"instance_type": t["instance_type"]} for t in TARGETS]
    traffic = {"phases": [{"duration_seconds": 60}]}
    serial = plan_json(tmp_path, {"targets": targets, "traffic": traffic})
    parallel = plan_json(tmp_path, {"targets": targets, "traffic": traffic, "max_parallel": 4})
    assert serial["minutes"] == pytest.approx(4 * (1 + 10))  # 1 min of load + 10 min deploy and teardown, each
    assert parallel["minutes"] == pytest.approx(1 + 10) and parallel["estimated_usd"] == pytest.approx(
        serial["estimated_usd"]
    )


RANGED = {
    "search": {"strategy": "adaptive", "budget": {"candidates": 6, "minutes": 20}},
    "variants": {
        "dynamic_batching": [False, {"preferred_batch_size": {"range": [1, 16], "log": True}}],
        "instance_group_counts": {"range": [1, 8]},
        "max_batch_sizes": {"range": [1, 64], "log": True},
    },
    "traffic": {"phases": [{"duration_seconds": 60}]},
}


def test_adaptive_search_over_ranges_is_planned_at_its_candidate_budget_not_the_space(tmp_path) -> None:
    estimate = plan_json(tmp_path, RANGED)
    assert (estimate["search"], estimate["space"], estimate["candidates"]) == ("adaptive", 2 * 8 * 64, 6)
    assert estimate["minutes"] == pytest.approx(6 * (1 + 0.5))  # each as if measured in full: an upper bound
    capped = plan_json(tmp_path, RANGED | {"search": {"strategy": "adaptive", "budget": {"minutes": 4}}})
    assert capped["candidates"] == 20 and capped["minutes"] == pytest.approx(
        4
    )  # the sampler's default; the minutes cap


def test_adaptive_search_over_ranges_prints_the_axes_it_searches(tmp_path) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"name": "p"} | RANGED))
    done = CliRunner().invoke(build_app(), ["plan", str(path)], env={"COLUMNS": "200"})
    assert done.exit_code == 0, done.output
    assert "adaptive search, the sampler proposes up to 6 candidates from a space of 1,024" in " ".join(
        done.output.split()
    )
    assert "range 1..8" in done.output and "range 1..64 (log)" in done.output
    assert "off | on, delay 100 us, preferred 1..16 (log)" in done.output
    assert "pt-nodb-ig1-mbs1" not in done.output  # the space's points are not listed


def test_adaptive_search_over_a_grid_probes_up_to_its_budget_split_over_targets(tmp_path) -> None:
    estimate = plan_json(
        tmp_path,
        {
            "targets": TARGETS,
            "search": {"strategy": "adaptive", "budget": {"candidates": 3}},
            "variants": {"instance_group_counts": [1, 2, 3]},
        },
    )
    assert [t["candidates"] for t in estimate["targets"]] == [2, 2]  # ceil(3 x 3/6) each: an upper bound


def test_a_run_checks_its_money_budget_against_the_candidates_it_may_probe_not_the_space() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "p",
            **RANGED,
            "search": {"strategy": "adaptive", "budget": {"candidates": 4}},
            "target": {"kind": "local", "price_per_hour": 36.0, "budget_usd": 5.0},
        }
    )
    candidates = expand_candidates(spec)
    assert planned_counts(spec, candidates) == {0: 4}
    RunBudget.for_spec(spec, planned_counts(spec, candidates))  # 4 x 1.5 min at $36/h = $3.60: allowed
    with pytest.raises(BudgetExceeded):
        RunBudget.for_spec(spec, len(candidates))  # the whole space of 1,024 would be refused


@pytest.mark.parametrize(
    "document, expected",
    [
        (RANGED, "adaptive search: up to 6 candidates sampled from a space of 1,024 on target local (local-cpu)"),
        ({"search": "adaptive", "max_candidates": 1}, "2 candidates, adaptive search: up to 1 probed on target local"),
        (
            {"max_candidates": 1, "targets": TARGETS},
            "4 candidates (the first 1 measured: max_candidates) on 2 targets: ml.g4dn.xlarge, ml.g4dn.2xlarge",
        ),
    ],
)
def test_validate_and_run_say_what_the_search_will_measure(tmp_path, document, expected) -> None:
    path = tmp_path / "plan.json"
    path.write_text(json.dumps({"name": "p", "variants": {"dynamic_batching": [False, True]}} | document))
    done = CliRunner().invoke(build_app(), ["validate", str(path)], env={"COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    assert expected in done.output


@pytest.mark.parametrize(
    "until_known, says",
    [
        (False, None),
        (True, "measured until known: at most this, each level ends once known)"),
        ({"from_top": True}, "from the top, the levels below the first that meets the limits are not run)"),
    ],
)
def test_an_estimate_measured_until_known_says_it_is_the_most_it_takes(tmp_path, until_known, says) -> None:
    path = tmp_path / "plan.json"
    traffic = SHAPES["concurrency"] | {"until_known": until_known}
    path.write_text(json.dumps({"name": "p", "traffic": traffic}))
    done = CliRunner().invoke(build_app(), ["plan", str(path)], env={"COLUMNS": "300"})
    assert done.exit_code == 0, done.output
    line = next(line for line in done.output.splitlines() if line.startswith("estimated duration"))
    assert ("measured until known" not in line) if says is None else (says in line)


def test_candidates_refused_before_any_server_starts_are_counted_as_skipped_not_to_run(tmp_path) -> None:
    """vLLM settings vLLM refuses at start and TensorRT on the CPU are skipped by the job before anything starts:
    the plan's count, duration and cost leave them out and say why, as the run's money budget does."""
    llm = {
        "name": "p",
        "model": {"source": "llama", "architecture": {"layers": 1, "hidden": 64, "heads": 2}},
        "target": {"kind": "vllm", "engine_args": {"max_num_seqs": [1, 4096]}},
        "traffic": {"phases": [{"duration_seconds": 60}]},
    }
    path = tmp_path / "llm.json"
    path.write_text(json.dumps(llm))
    done = CliRunner().invoke(build_app(), ["plan", str(path), "--json"])
    assert done.exit_code == 0, done.output
    estimate = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    (target,) = estimate["targets"]
    assert (estimate["space"], estimate["candidates"], target["candidates"]) == (3, 2, 2)  # default and seqs1
    (skipped,) = estimate["skipped"]
    assert skipped["name"] == "vllm-seqs4096"
    assert "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs (4096)" in skipped["reason"]
    assert estimate["minutes"] == pytest.approx(2 * target["minutes_per_candidate"])
    said = CliRunner().invoke(build_app(), ["plan", str(path)])
    assert said.exit_code == 0, said.output
    words = " ".join(said.output.split())  # the console wraps the line
    assert "2 to run, 1 skipped before any server starts (vllm-seqs4096: vLLM 0.32.0 refuses it:" in words, words
    checked = CliRunner().invoke(build_app(), ["validate", str(path)])  # `run` prints the same line first
    assert checked.exit_code == 0, checked.output
    said_there = " ".join(checked.output.split())
    assert "3 candidates (1 skipped before any server starts: see `recommender plan`) on target vllm" in said_there

    cpu = {"target": {"accelerator": "cpu"}, "variants": {"optimizations": ["onnx", "trt"], "dynamic_batching": [True]}}
    trt = plan_json(tmp_path, cpu)
    assert (trt["space"], trt["candidates"]) == (2, 1)
    (skipped,) = trt["skipped"]
    assert skipped["name"].startswith("trt-") and skipped["reason"].startswith("TensorRT needs an NVIDIA GPU")


def test_a_runs_budget_counts_only_the_candidates_it_may_start() -> None:
    spec = ExperimentSpec.model_validate(
        {
            "name": "p",
            "model": {"source": "llama", "architecture": {"layers": 1, "hidden": 64, "heads": 2}},
            "target": {"kind": "vllm", "engine_args": {"max_num_seqs": [1, 4096]}},
        }
    )
    candidates = expand_candidates(spec)
    refused = planned_refusals(spec, candidates)
    assert [c.name for c in candidates if c.key in refused] == ["vllm-seqs4096"]
    assert planned_counts(spec, candidates, refused) == {0: 2}
    assert planned_counts(spec, candidates) == {0: 3}


def test_a_generative_engines_candidates_are_planned_as_batching_continuously_not_with_tritons_settings(
    tmp_path,
) -> None:
    """vLLM and llama.cpp batch on their own: the plan's batching column says so, not the Triton dynamic batching a
    Triton candidate's row shows (before: "on, delay 100 us, preferred []" on every vllm and llamacpp row)."""
    path = tmp_path / "llm.yaml"
    root = Path(__file__).resolve().parents[2]
    path.write_text((root / "experiments" / "llm.yaml").read_text())
    said = CliRunner(env={"COLUMNS": "250"}).invoke(build_app(), ["plan", str(path)])
    assert said.exit_code == 0, said.output
    rows = [line for line in said.output.splitlines() if "@vllm" in line or "@llamacpp" in line]
    assert len(rows) == 22, said.output  # 13 vLLM and 9 llama.cpp, each engine's default among them
    assert all("continuous (the engine's)" in row and "delay" not in row for row in rows), rows
