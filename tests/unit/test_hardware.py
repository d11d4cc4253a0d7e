"""Hardware as a measured fact: NVML detection (a fake NVML at the process boundary), accelerator resolution and the
preflight refusal on this CPU-only host, KIND_GPU rendering and placement, and the hardware stored with every run."""

from __future__ import annotations

from pathlib import Path

import pynvml
import pytest

from recommender.candidates import Candidate
from recommender.hardware import (
    Gpu,
    GpuStatus,
    Hardware,
    HardwareMissing,
    cpu_features,
    cuda_mismatch,
    describe_served,
    detect_hardware,
    gpu_instance_groups,
    resolve_accelerator,
    serving_hardware,
)
from recommender.install import pip_install, requirement
from recommender.job.pipeline import Job, JobOptions
from recommender.load.null_endpoint import NullEndpoint
from recommender.modelrepo.artifact import ModelArtifact, TensorSpec
from recommender.modelrepo.repository import render_config
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.store.results import ResultStore
from recommender.targets.docker import DockerTarget
from recommender.targets.local import LocalTarget
from tests.fake_nvml import FakeNvml
from tests.unit.test_pipeline_budget import Recorder, remote_spec

CPU_ONLY = Hardware("Test CPU", 2, gpu_status="no GPU (NVML: driver not loaded)")
TWO_GPUS = Hardware(
    "Test CPU", 16, (Gpu(0, "NVIDIA A10G", 23028.0), Gpu(1, "NVIDIA A10G", 23028.0)), "550.54", "12.4", "2 GPU(s)"
)


def test_detect_reads_every_gpu_through_nvml() -> None:
    nvml = FakeNvml(["NVIDIA H100", "NVIDIA H100"])
    found = detect_hardware(nvml)
    assert [(g.index, g.name, g.memory_mb) for g in found.gpus] == [
        (0, "NVIDIA H100", 24576.0),
        (1, "NVIDIA H100", 24576.0),
    ]
    assert (found.driver_version, found.cuda_version, found.gpu_status) == ("550.54.15", "12.4", "2 GPU(s)")
    assert found.cpu_cores >= 1 and found.cpu_model and nvml.shut
    assert Hardware.from_dict(found.to_dict()) == found


def test_no_driver_is_no_gpu_said_plainly() -> None:
    found = detect_hardware(FakeNvml([], fail=RuntimeError("Driver Not Loaded")))
    assert found.gpus == () and found.gpu_status == "no GPU (NVML: Driver Not Loaded)"
    assert detect_hardware(FakeNvml([])).gpu_status == "no GPU (NVML found no device)"


@pytest.mark.parametrize(
    "build, driver_cuda, refused",
    [
        ("13.0", "12.4", "needs NVIDIA driver R580 or newer; this host's driver 550.54.15 supports CUDA 12.4 at most"),
        ("12.8", "12.4", None),  # one CUDA major version: minor-version compatibility
        ("12.4", "13.0", None),
        (None, "12.4", None),  # a CPU build
    ],
)
def test_a_cuda_build_newer_than_the_driver_is_named_with_the_driver_it_needs(build, driver_cuda, refused) -> None:
    hardware = Hardware("Test CPU", 16, (Gpu(0, "NVIDIA H100", 81559.0),), "550.54.15", driver_cuda, "1 GPU(s)")
    said = cuda_mismatch("torch 2.13.0", build, hardware)
    assert said == (None if refused is None else f"torch 2.13.0 is a CUDA {build} build, which {refused}")
    assert cuda_mismatch("torch 2.13.0", build, CPU_ONLY) is None  # no GPU: nothing to compare with


@pytest.mark.parametrize(
    "code, reason",
    [(pynvml.NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"), (pynvml.NVML_ERROR_GPU_IS_LOST, "GPU is lost")],
)
def test_an_nvml_error_after_init_is_no_gpu_with_the_reason(code: int, reason: str) -> None:
    """NVML's own exception classes (NVMLError_NoPermission, NVMLError_GpuIsLost) raised after nvmlInit."""
    nvml = FakeNvml(["NVIDIA H100"], fail_after_init=pynvml.NVMLError(code))
    found = detect_hardware(nvml)
    assert found.gpus == () and found.gpu_status == f"no GPU (NVML: {reason})" and nvml.shut
    with pytest.raises(HardwareMissing, match=reason):
        resolve_accelerator("gpu", found)


@pytest.mark.parametrize("mig", [True, False, None])
def test_mig_mode_is_read_per_gpu_and_stored(mig: bool | None) -> None:
    found = detect_hardware(FakeNvml(["NVIDIA A100"], mig=mig))
    assert found.gpus[0].mig is mig and Hardware.from_dict(found.to_dict()) == found


@pytest.mark.parametrize(
    "requested, hardware, expected",
    [
        ("auto", CPU_ONLY, "cpu"),
        ("auto", TWO_GPUS, "gpu"),
        ("cpu", TWO_GPUS, "cpu"),
        ("gpu", TWO_GPUS, "gpu"),
    ],
)
def test_accelerator_resolution(requested, hardware, expected) -> None:
    assert resolve_accelerator(requested, hardware) == expected


def test_gpu_without_one_is_refused_with_exit_2_and_the_fix() -> None:
    with pytest.raises(HardwareMissing) as caught:
        resolve_accelerator("gpu", CPU_ONLY)
    assert caught.value.exit_code == 2
    assert "target.accelerator is gpu" in caught.value.message and "driver not loaded" in caught.value.message
    assert "target.accelerator: auto" in caught.value.hint


@pytest.mark.parametrize("target", [LocalTarget(accelerator="gpu"), DockerTarget(accelerator="gpu")])
def test_preflight_refuses_gpu_on_this_cpu_only_host(target) -> None:
    if detect_hardware().gpus:
        pytest.skip("this host has a GPU: the refusal is for CPU-only hosts")
    with pytest.raises(HardwareMissing, match=r"target.accelerator is gpu"):
        target.preflight()


def test_cloud_targets_declare_their_hardware_by_instance_type() -> None:
    g5 = TargetSpec(kind="sagemaker", instance_type="ml.g5.xlarge", role_arn="r", bucket="b", image_uri="i")
    assert serving_hardware(g5).accelerator == "gpu" and serving_hardware(g5).declared == "ml.g5.xlarge"
    m5 = g5.model_copy(update={"instance_type": "ml.m5.xlarge", "accelerator": "gpu"})
    with pytest.raises(HardwareMissing, match=r"ml.m5.xlarge has no GPU"):
        serving_hardware(m5)


@pytest.mark.parametrize("kind", ["vllm", "llamacpp", "infinity"])
def test_engines_that_serve_on_this_host_record_its_cpu_and_keep_their_declared_accelerator(kind) -> None:
    """vLLM, llama.cpp and Infinity start their server on this host: a run records its CPU model and cores (llama.cpp's
    threads cliff reads them; the key tells hosts apart), while the accelerator stays the instance type's (the engine
    picks its own device)."""
    host = Hardware("Test CPU", 6)
    served = serving_hardware(TargetSpec(kind=kind), host)
    assert served.hardware == host and served.accelerator == "cpu" and served.declared == "local-cpu"
    stored = served.to_dict()
    assert stored["cpu_cores"] == 6 and "detected" not in stored
    remote = serving_hardware(TargetSpec(kind="remote", endpoint="http://10.0.0.1:8000"), host)
    assert remote.hardware is None  # a remote endpoint's host is not this one


def test_the_cpus_number_format_features_are_read_from_cpuinfo_and_stored_with_the_run(tmp_path: Path) -> None:
    """The flags that say which number formats a CPU computes natively are recorded (decide/cpu_precision.py reads
    them): x86's `flags` line, Arm's `Features` line, in NUMBER_FEATURES' order; nothing where there is no cpuinfo; a
    run stored before they were reads back as ()."""
    epyc = tmp_path / "epyc"
    epyc.write_text(
        "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma f16c bmi2\n\nflags : avx512f\n"
    )
    assert cpu_features(str(epyc)) == ("avx2", "fma", "f16c")  # the first processor's line only
    xeon = tmp_path / "xeon"
    xeon.write_text("flags\t: avx512_bf16 amx_tile avx2 amx_bf16 amx_int8 avx512f\n")
    assert cpu_features(str(xeon)) == ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8")
    arm = tmp_path / "arm"
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd asimdhp fphp bf16 i8mm sve\n")
    assert cpu_features(str(arm)) == ("asimd", "asimdhp", "fphp", "bf16", "i8mm", "sve")
    assert cpu_features(str(tmp_path / "absent")) == ()
    host = Hardware("AMD EPYC", 2, cpu_features=("avx2", "fma"))
    stored = serving_hardware(TargetSpec(kind="vllm"), host).to_dict()
    assert stored["cpu_features"] == ["avx2", "fma"] and Hardware.from_dict(stored) == host
    assert Hardware.from_dict({"cpu_model": "Intel Xeon", "cpu_cores": 2}) == Hardware("Intel Xeon", 2)  # before
    assert detect_hardware(FakeNvml([])).cpu_features == cpu_features()  # this host's, whatever it has


@pytest.mark.parametrize(
    "count, gpus, expected",
    [
        (1, [0], [(1, [0])]),
        (2, [0, 1], [(1, [0]), (1, [1])]),
        (3, [0, 1], [(2, [0]), (1, [1])]),
        (1, [0, 1, 2], [(1, [0])]),
        (4, [2, 3], [(2, [2]), (2, [3])]),
    ],
)
def test_instances_are_placed_round_robin_over_the_gpus(count, gpus, expected) -> None:
    assert gpu_instance_groups(count, gpus) == expected
    assert sum(n for n, _ in gpu_instance_groups(count, gpus)) == count


def _artifact(tmp_path: Path) -> ModelArtifact:
    return ModelArtifact(
        tmp_path / "model.onnx",
        "onnx",
        (TensorSpec("input_ids", "TYPE_INT64", (-1,)),),
        (TensorSpec("embedding", "TYPE_FP32", (384,)),),
    )


def test_kind_gpu_renders_one_group_per_gpu(tmp_path: Path) -> None:
    candidate = Candidate("onnx", None, 3, 8, "local-gpu")
    text = render_config(candidate, _artifact(tmp_path), "model", 1, "KIND_GPU", (0, 1))
    assert (
        "instance_group [\n  {\n    count: 2\n    kind: KIND_GPU\n    gpus: [ 0 ]\n  },\n"
        "  {\n    count: 1\n    kind: KIND_GPU\n    gpus: [ 1 ]\n  }\n]"
    ) in text
    single = render_config(candidate, _artifact(tmp_path), "model", 1, "KIND_GPU")
    assert "instance_group [\n  {\n    count: 3\n    kind: KIND_GPU\n  }\n]" in single


def test_hardware_and_backend_are_stored_with_the_run(tmp_path: Path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    spec = ExperimentSpec.model_validate({"name": "hw"})
    candidate_id = store.save_candidate(store.save_experiment(spec), Candidate("onnx", None, 1, 8, "local-cpu"))
    hardware = serving_hardware(spec.target, CPU_ONLY).to_dict()
    run_id = store.start_run(candidate_id, "p", None, hardware=hardware, backend="python:onnxruntime")
    store.finish_run(run_id, "skipped", reason="test")
    (result,) = store.results("hw")
    assert result.hardware == hardware and result.hardware["accelerator"] == "cpu"
    assert result.backend == "python:onnxruntime"
    assert describe_served(result.hardware, result.backend) == (
        "cpu (Test CPU, 2 cores; no GPU (NVML: driver not loaded)), backend python:onnxruntime"
    )


def test_the_job_stores_the_hardware_of_every_run(tmp_path: Path) -> None:
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    with NullEndpoint(delay_ms=1) as url:
        spec = remote_spec(url, budget=1.0)
        store.save_experiment(spec)
        store.add_spend(spec.name, 1.0)  # nothing is deployed: every run is recorded, skipped, with its hardware
        results = Job(spec, store, JobOptions(run_root=tmp_path / "runs"), Recorder()).run()
    assert [r.hardware for r in results] == [{"accelerator": "cpu", "declared": "local-cpu", "detected": False}] * 2
    assert describe_served(results[0].hardware, None) == "cpu (declared by instance type local-cpu, not detected)"


def test_tensorrt_skip_reason_is_true_here_and_names_the_install_command() -> None:
    from recommender.errors import CandidateSkipped
    from recommender.modelrepo.export import export_model

    if detect_hardware().gpus:
        pytest.skip("this host has a GPU")
    with pytest.raises(CandidateSkipped) as caught:
        export_model(ExperimentSpec.model_validate({"name": "t"}).model, "trt", 16, "f", Path("/nonexistent"))
    assert caught.value.message.startswith("TensorRT needs an NVIDIA GPU; this run serves on the CPU (no GPU")
    assert (
        pip_install(requirement("nvidia-ml-py")) in caught.value.message
        and "not implemented" not in caught.value.message
    )


@pytest.mark.parametrize(
    ("status", "text"),
    [
        (GpuStatus(2), "2 GPU(s)"),
        (GpuStatus(why_none="nvidia-ml-py not installed"), "no GPU (nvidia-ml-py not installed)"),
        (GpuStatus(why_none="NVML Shared Library Not Found (libnvidia-ml.so.1)"), None),
        (GpuStatus(), "not sampled"),
    ],
)
def test_gpu_status_is_stored_as_text_and_read_back_whole(status: GpuStatus, text: str | None) -> None:
    assert GpuStatus.parse(status.text) == status
    if text is not None:
        assert status.text == text
