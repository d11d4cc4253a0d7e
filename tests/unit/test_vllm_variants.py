"""vLLM engine settings as variants: the candidate grid of a vllm target's listed settings (the engine's default
always among them, a fixed configuration's key as it was), the refusals of what vLLM 0.32 would not start (each with
vLLM's reason; tests/vllm checks them against vLLM's own configuration code), and the deployment serving the
candidate's settings (the launch faked at the process boundary)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from recommender.candidates import VLLM, Candidate, DynamicBatching, engine_settings, expand_candidates
from recommender.errors import InputError, SpecError
from recommender.modelrepo.llama import CONTEXT
from recommender.spec import load_spec
from recommender.targets import vllm, vllm_venv
from recommender.targets.vllm import VllmTarget, setting_flags
from recommender.targets.vllm_rules import refusal
from tests.unit.test_vllm_target import KNOWN, LLAMA

GRID = "target:\n  kind: vllm\n  engine_args: {max_num_seqs: [1, 8], enable_chunked_prefill: [true, false]}\n"


def spec_of(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: gen\n{LLAMA}{text}")
    return load_spec(path)


def by_name(tmp_path: Path, text: str) -> dict[str, Candidate]:
    return {candidate.name: candidate for candidate in expand_candidates(spec_of(tmp_path, text))}


def test_listed_settings_make_one_candidate_per_combination_and_the_default_first(tmp_path) -> None:
    candidates = expand_candidates(spec_of(tmp_path, GRID))
    names = [candidate.name for candidate in candidates]
    assert names == ["vllm-default", "vllm-seqs1-chunk", "vllm-seqs1-nochunk", "vllm-seqs8-chunk", "vllm-seqs8-nochunk"]
    default, *_, last = candidates
    assert engine_settings(default.config()) == {"kv_cache_gib": 1.0}  # every listed setting left to vLLM
    assert engine_settings(last.config()) == {"kv_cache_gib": 1.0, "max_num_seqs": 8, "enable_chunked_prefill": False}
    assert [candidate.max_batch_size for candidate in candidates] == [0, 1, 1, 8, 8]
    assert len({candidate.key for candidate in candidates}) == 5
    assert all(Candidate.from_config(candidate.config()) == candidate for candidate in candidates)


def test_a_single_value_is_every_candidates_and_the_kv_cache_can_be_listed(tmp_path) -> None:
    found = by_name(
        tmp_path,
        "target: {kind: vllm, kv_cache_gib: [1, 3], engine_args: {max_model_len: 512, dtype: [bfloat16, float32]}}\n",
    )
    assert sorted(found) == sorted(
        ["vllm-default", "vllm-bf16-kv1g", "vllm-bf16-kv3g", "vllm-fp32-kv1g", "vllm-fp32-kv3g"]
    )
    assert engine_settings(found["vllm-default"].config()) == {"kv_cache_gib": 1.0, "max_model_len": 512}
    assert engine_settings(found["vllm-fp32-kv3g"].config()) == {
        "kv_cache_gib": 3.0,
        "max_model_len": 512,
        "dtype": "float32",
    }


def test_a_fixed_configuration_keeps_its_name_and_the_key_it_was_stored_under(tmp_path) -> None:
    (fixed,) = expand_candidates(spec_of(tmp_path, "target: {kind: vllm, engine_args: {max_num_seqs: 4}}\n"))
    # the key as the fixed target's candidate was made before variants: its engine JSON, the wire and KV cache
    before = {"protocol": "openai-chat", "kv_cache_gib": 1.0, "max_num_seqs": 4}
    engine = json.dumps(before, sort_keys=True, separators=(",", ":"))
    made = Candidate(VLLM, DynamicBatching(), 1, 4, "local-cpu", fixed.model_fingerprint, engine=engine)
    assert (fixed.name, fixed.key) == ("vllm", made.key)
    assert (
        fixed.key
        == hashlib.sha256(json.dumps(made.config(), sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]
    )


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("target: {kind: vllm, engine_args: {max_num_seqs: []}}\n", "at least 1 item"),
        (
            "target: {kind: vllm, engine_args: {max_num_seqs: [4, 4]}}\n",
            "engine setting max_num_seqs lists a value twice",
        ),
        ("target: {kind: vllm, kv_cache_gib: [0, 1]}\n", "greater than 0"),
    ],
)
def test_a_bad_list_is_refused_in_the_file(tmp_path, text: str, problem: str) -> None:
    with pytest.raises(SpecError) as info:
        spec_of(tmp_path, text)
    assert problem in " ".join(info.value.problems)


def test_every_listed_value_is_checked_against_the_installed_vllms_flags() -> None:
    assert setting_flags({"max_num_seqs": [1, 8], "enable_prefix_caching": [True, False]}, KNOWN) == [
        "--max-num-seqs",
        "1",
        "--max-num-seqs",
        "8",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
    ]
    with pytest.raises(InputError, match=r"engine_args\.max_num_seq is not an argument"):
        setting_flags({"max_num_seqs": [1], "max_num_seq": [2, 3]}, KNOWN)


CPU = None  # refusal's gpus on the CPU


@pytest.mark.parametrize(
    ("engine", "gpus", "reason"),
    [
        (
            {"max_num_batched_tokens": 512, "enable_chunked_prefill": False},
            CPU,
            f"max_num_batched_tokens (512) is smaller than max_model_len ({CONTEXT})",
        ),
        ({"max_num_batched_tokens": 4, "max_num_seqs": 8}, CPU, "max_num_batched_tokens (4) must be greater than"),
        ({"max_num_seqs": 4096}, CPU, "max_num_batched_tokens (2048) must be greater than or equal to max_num_seqs"),
        ({"dtype": "fp8"}, CPU, "Unknown dtype: 'fp8'"),
        ({"tensor_parallel_size": 2}, 1, "World size (2) is larger than the number of available GPUs (1)"),
        ({"tensor_parallel_size": 3}, 4, "attention heads (4) must be divisible by tensor parallel size (3)"),
        ({"gpu_memory_utilization": 1.5}, 1, "gpu_memory_utilization (1.5) must be above 0 and at most 1"),
        ({"max_model_len": CONTEXT * 2}, CPU, f"max_model_len ({CONTEXT * 2}) is greater than the derived"),
        ({"max_num_seqs": "eight"}, CPU, "argument --max-num-seqs: invalid int value: 'eight'"),
        ({"tensor_parallel_size": True}, CPU, "argument --tensor-parallel-size: invalid int value: 'True'"),
        ({"tensor_parallel_size": 0}, 1, "tensor_parallel_size: Input should be greater than or equal to 1"),
        ({"max_num_batched_tokens": 8.5}, CPU, "argument --max-num-batched-tokens: invalid int value: '8.5'"),
        ({"kv_cache_gib": 1.5}, CPU, "invalid literal for int() with base 10: '1.5'"),
    ],
)
def test_what_vllm_refuses_is_refused_with_its_reason(engine: dict, gpus: int | None, reason: str) -> None:
    refused = refusal(engine, gpus, CONTEXT, heads=4)
    assert refused is not None and refused.startswith(f"vLLM {vllm_venv.VERSION} refuses it: ") and reason in refused


@pytest.mark.parametrize(
    ("engine", "gpus"),
    [
        ({}, CPU),
        ({"dtype": "float16"}, CPU),  # vLLM 0.32 runs float16 on an x86 or aarch64 CPU (platforms/cpu.py)
        ({"max_num_batched_tokens": 512}, CPU),  # chunked prefill (a Llama's default) takes a short budget
        ({"max_num_batched_tokens": 512, "enable_chunked_prefill": False, "max_model_len": 512}, CPU),
        ({"max_num_seqs": 256, "enable_chunked_prefill": False}, CPU),  # the unset budget is raised to the context
        ({"tensor_parallel_size": 2, "gpu_memory_utilization": 0.5}, 2),
        ({"kv_cache_gib": 2.0}, CPU),
        ({"kv_cache_gib": 1.5}, 1),  # the CPU's variable: a GPU does not read it
        ({"max_num_seqs": "8", "max_model_len": "1k"}, CPU),  # a flag's text; vLLM's own length forms not judged
    ],
)
def test_what_vllm_starts_is_not_refused(engine: dict, gpus: int | None) -> None:
    assert refusal(engine, gpus, CONTEXT, heads=4) is None


def test_a_candidate_is_judged_on_its_own_settings_and_the_models_heads(tmp_path) -> None:
    spec = spec_of(tmp_path, "target: {kind: vllm, engine_args: {tensor_parallel_size: [1, 3]}}\n")
    found = {candidate.name: candidate for candidate in expand_candidates(spec)}
    heads = spec.model.architecture.heads  # type: ignore[union-attr]  # a llama spec has one
    assert refusal(engine_settings(found["vllm-tp1"].config()), 1, CONTEXT, heads) is None
    refused = refusal(engine_settings(found["vllm-tp3"].config()), 4, CONTEXT, heads)
    assert "divisible by tensor parallel size (3)" in str(refused)


def test_a_deployment_serves_its_candidates_settings_and_kv_cache(tmp_path, monkeypatch) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(vllm_venv, "server_python", lambda gpu=False: tmp_path / "venv" / "bin" / "python")
    monkeypatch.setattr(vllm, "known_flags", lambda python: KNOWN)
    launched: list[tuple[list[str], dict]] = []

    def launch(self, cmd, env) -> None:
        launched.append((cmd, env))
        raise KeyboardInterrupt  # stop at the launch: no server here

    monkeypatch.setattr(vllm.LocalStackDeployment, "launch", launch)
    candidate = by_name(tmp_path, "target: {kind: vllm, kv_cache_gib: [2], engine_args: {max_num_seqs: [1, 8]}}\n")[
        "vllm-seqs8-kv2g"
    ]
    target = VllmTarget(engine_args={"max_num_seqs": [1, 8]}, kv_cache_gib=1.0)
    with pytest.raises(KeyboardInterrupt):
        target.deploy(model, "model", tmp_path / "run", config=candidate.config())
    ((cmd, env),) = launched
    assert cmd[cmd.index("--max-num-seqs") + 1] == "8" and cmd.count("--max-num-seqs") == 1
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "2"
