"""The generation gate on the real vLLM server: one server serves a copy of the tiny Llama with noise added to every
weight, in fp32. Judged against the reference built from the very folder it serves (an exact copy of the served
weights), its greedy tokens match exactly and its teacher-forced logprobs agree; judged against the reference of
the original weights, it is refused, with its first diverging position and both tokens. A second server serves the
original weights at vLLM's default dtype (a 16-bit type on this CPU): within its precision's tolerance. A third is
the job's: `recommender run` of a vllm candidate at dtype float32 stores the gate's verdict with the run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from recommender.correctness.generation_gate import check_generation
from recommender.correctness.tokens import TOKEN_TOLERANCES
from recommender.spec import ExperimentSpec
from recommender.targets.vllm import VllmDeployment, VllmTarget
from tests.vllm.conftest import READY_S, TINY

pytestmark = pytest.mark.vllm
NOISE = 0.02  # the weights' own initial standard deviation: a different model, as a broken conversion makes one


def perturbed_copy(folder: Path, into: Path) -> Path:
    """A copy of the model folder whose every weight has seeded Gaussian noise of std NOISE added."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(folder, into)
    weights = load_file(str(into / "model.safetensors"))
    generator = torch.Generator().manual_seed(1)
    noisy = {name: w + NOISE * torch.randn(w.shape, generator=generator, dtype=w.dtype) for name, w in weights.items()}
    save_file(noisy, str(into / "model.safetensors"), metadata={"format": "pt"})
    return into


@pytest.fixture(scope="module")
def perturbed(model_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return perturbed_copy(model_folder, tmp_path_factory.mktemp("perturbed") / "llama")


@pytest.fixture(scope="module")
def fp32_server(vllm_venv_in_use: Path, perturbed: Path, tmp_path_factory) -> Iterator[VllmDeployment]:
    """The perturbed copy served in fp32 on the chat wire (the gate asks the completions route all the same)."""
    target = VllmTarget(engine_args={"max_num_seqs": 4, "dtype": "float32"}, ready_timeout=READY_S)
    with target.deploy(perturbed, "model", tmp_path_factory.mktemp("gate-run")) as deployment:
        yield deployment


def spec() -> ExperimentSpec:
    return ExperimentSpec(
        name="gate", model={"source": "llama", "architecture": TINY.model_dump()}, target={"kind": "vllm"}
    )


def test_a_candidate_serving_the_reference_weights_passes_and_perturbed_weights_are_refused(
    fp32_server: VllmDeployment, perturbed: Path, model_folder: Path
) -> None:
    exact = check_generation(fp32_server, spec(), perturbed, "fp32")
    assert exact.checked and exact.passed, exact.reason
    assert len(exact.figures) == 3 and all(f["first_divergence"] is None for f in exact.figures)
    assert all(f["token_ids"] == "served" and f["teacher_forced"] for f in exact.figures)
    assert max(f["max_logprob_error"] for f in exact.figures) <= TOKEN_TOLERANCES["fp32"].logprob_atol

    changed = check_generation(fp32_server, spec(), model_folder, "fp32")
    assert changed.checked and not changed.passed and changed.reason is not None
    assert "first diverging at token" in changed.reason
    diverged = [f["first_divergence"] for f in changed.figures if f["first_divergence"] is not None]
    assert diverged, changed.figures
    first = diverged[0]
    assert first["served_id"] != first["reference_id"] and first["served"] and first["reference"]
    assert f"served {first['served']!r} vs reference {first['reference']!r}" in changed.reason
    assert min(f["max_logprob_error"] for f in changed.figures) > TOKEN_TOLERANCES["bf16"].logprob_atol


def test_the_default_candidate_at_the_engines_own_16_bit_type_passes_within_its_precisions_tolerance(
    vllm_venv_in_use: Path, model_folder: Path, tmp_path: Path
) -> None:
    """vLLM's default dtype (`auto`: this float32 model downcast to bf16 or fp16) serving the reference's weights is
    within the table's `auto` row, teacher forced: the default candidate is never refused for its precision."""
    with VllmTarget(engine_args={"max_num_seqs": 4}, ready_timeout=READY_S).deploy(
        model_folder, "model", tmp_path / "run"
    ) as deployment:
        found = check_generation(deployment, spec(), model_folder, "auto")
    assert found.checked and found.passed, found.reason
    assert all(f["teacher_forced"] for f in found.figures)
    assert 0 < max(f["max_logprob_error"] for f in found.figures) <= TOKEN_TOLERANCES["auto"].logprob_atol
