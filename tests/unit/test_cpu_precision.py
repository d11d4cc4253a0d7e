"""The report's note on a vLLM candidate served at a 16-bit type its CPU does not compute natively
(decide/cpu_precision.py): said from what the runs stored (the gate's precision, the CPU's recorded features), once
per precision and CPU, never for a CPU that has the instructions, a GPU, another engine, or a run that recorded no
features."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from recommender.candidates import CandidateResult, RunStatus, expand_candidates
from recommender.decide.cpu_precision import emulated_precision_notes
from recommender.decide.recommendation import recommend
from recommender.spec import load_spec

EPYC = {"accelerator": "cpu", "cpu_model": "AMD EPYC", "cpu_cores": 2, "cpu_features": ["avx2", "fma", "f16c"]}
XEON = {"accelerator": "cpu", "cpu_model": "Intel Xeon", "cpu_cores": 2, "cpu_features": ["avx512f", "avx512_bf16"]}


def results(tmp_path: Path, target: str, hardware: dict[str, Any] | None, precision: str) -> list[CandidateResult]:
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: gen\nmodel: {{source: llama, architecture: {{layers: 2, hidden: 64, heads: 4}}}}\n{target}")
    tolerance = {"generated_tokens": 16, "min_agreement": 0.9, "logprob_atol": 0.05}
    reference = {"kind": "transformers fp32 greedy on CPU", "library": "transformers", "version": "5.25.0"}
    correctness = {"checked": True, "passed": True, "reason": None, "tolerance": tolerance, "precision": precision,
                   "reference": reference, "figures": [], "unchecked_cases": []}  # fmt: skip
    return [
        CandidateResult(
            c.key, c.name, c.config(), RunStatus.OK, None, None, None, 1, 1.0, None, hardware=hardware,
            correctness=correctness,
        )
        for c in expand_candidates(load_spec(path))
    ]  # fmt: skip


VLLM = "target: {kind: vllm, engine_args: {max_num_seqs: [2, 4, 8, 16]}}\n"


def test_vllm_at_bf16_on_a_cpu_without_bf16_instructions_is_named_once_with_what_to_measure(tmp_path) -> None:
    served = results(tmp_path, VLLM, EPYC, "bf16")
    (note,) = emulated_precision_notes(served)
    assert note.startswith("vLLM served bf16 on AMD EPYC, which has no bf16 instructions (none of avx512_bf16,")
    assert f"{len(served)} candidates (vllm-default, vllm-seqs2, vllm-seqs4 and {len(served) - 3} more)" in note
    assert note.endswith("engine_args dtype: [auto, float32]")
    # the recommendation carries it among its notes
    assert note in recommend(served, load_spec(tmp_path / "spec.yaml")).notes


def test_no_note_where_the_cpu_computes_the_type_or_nothing_says_it_cannot(tmp_path) -> None:
    assert emulated_precision_notes(results(tmp_path, VLLM, XEON, "bf16")) == []  # AVX512_BF16
    assert emulated_precision_notes(results(tmp_path, VLLM, EPYC, "fp32")) == []  # float32 served
    assert emulated_precision_notes(results(tmp_path, VLLM, {**EPYC, "cpu_features": []}, "bf16")) == []  # before
    assert emulated_precision_notes(results(tmp_path, VLLM, None, "bf16")) == []
    assert emulated_precision_notes(results(tmp_path, VLLM, {**EPYC, "accelerator": "gpu"}, "bf16")) == []
    llamacpp = "target: {kind: llamacpp, llamacpp: {threads: [1]}}\n"  # f16 KV cache: llama.cpp's own kernels
    assert emulated_precision_notes(results(tmp_path, llamacpp, EPYC, "fp16")) == []
    (fp16,) = emulated_precision_notes(results(tmp_path, VLLM, XEON, "fp16"))  # no AVX512_FP16 on that Xeon
    assert fp16.startswith("vLLM served fp16 on Intel Xeon, which has no fp16 instructions")
