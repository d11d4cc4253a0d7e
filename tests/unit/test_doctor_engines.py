"""The engine of each optimization, checked where its candidates serve (issue 23, items 1 and 15). The boundaries are
faked: the import system (a fake module, or None in sys.modules for one not installed), package metadata (a fake
installed `tensorrt-cu13` distribution on sys.path) and NVML (a fake pynvml module, tests/unit/test_hardware.py).
The job skips a candidate whose engine is missing before anything is exported or any server starts."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from recommender.doctor.engines import engine_check, engine_refusals, tensorrt_cuda
from recommender.hardware import Gpu, Hardware, ServingHardware
from recommender.install import requirement
from recommender.job.pipeline import Job, JobOptions
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore
from recommender.targets.docker import TENSORRT_LABEL, TRITON_LABEL, ImageVersions
from tests.fake_docker import calls, install_fake_docker
from tests.fake_nvml import FakeNvml
from tests.unit.test_hardware import CPU_ONLY
from tests.unit.test_pipeline_budget import Recorder

PYTHON = sys.executable


def gpu_host(cuda: str, driver: str) -> ServingHardware:
    return ServingHardware("gpu", Hardware("Test CPU", 16, (Gpu(0, "NVIDIA H100", 81559.0),), driver, cuda, "1 GPU(s)"))


CPU_RUN = ServingHardware("cpu", CPU_ONLY)
OLD_DRIVER = gpu_host("12.4", "550.54.15")  # R550: CUDA 12 builds only
NEW_DRIVER = gpu_host("13.0", "580.65.06")


def fake_torch(cuda: str | None) -> SimpleNamespace:
    return SimpleNamespace(__version__="2.13.0" if cuda else "2.13.0+cpu", version=SimpleNamespace(cuda=cuda))


def fake_onnxruntime(*providers: str) -> SimpleNamespace:
    return SimpleNamespace(__version__="1.22.0", get_available_providers=lambda: list(providers))


@pytest.fixture
def installed_tensorrt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """TensorRT 10.13.3 as pip installs it: `import tensorrt` works, its CUDA 13 wheel `tensorrt_cu13` is installed."""
    info = tmp_path / "site" / "tensorrt_cu13-10.13.3.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorrt_cu13\nVersion: 10.13.3.9\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.13.3.9"))


def test_an_engine_not_installed_is_refused_with_the_install_command_for_this_interpreter(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)  # not installed
    check = engine_check("openvino", CPU_RUN, native=False, where="local")
    assert (check.name, check.passed) == ("openvino engine (local)", False)
    assert check.found == f"openvino is not installed for {PYTHON}"
    assert check.fix == f"{PYTHON} -m pip install '{requirement('openvino')}'" and "openvino" in check.fix
    assert engine_refusals(["pt", "openvino"], CPU_RUN, native=False) == {"openvino": f"{check.found}: {check.fix}"}


def test_the_image_targets_need_no_engine_here_but_tensorrt(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "openvino", None)
    assert engine_check("openvino", CPU_RUN, native=True, where="docker").passed  # the image's openvino backend
    trt = engine_check("trt", CPU_RUN, native=True, where="docker")
    assert not trt.passed and trt.found.startswith("TensorRT needs an NVIDIA GPU; this run serves on the CPU")
    remote = engine_check("trt", ServingHardware("gpu", None, declared="ml.g5.xlarge"), native=True, where="sagemaker")
    assert "not on the remote ml.g5.xlarge" in remote.found and "local or docker target" in remote.fix


@pytest.mark.parametrize(
    "serving, cuda, refused, fix",
    [
        (NEW_DRIVER, "13.0", None, None),
        (OLD_DRIVER, "12.6", None, None),
        (OLD_DRIVER, "13.0", "which needs NVIDIA driver R580 or newer; this host's driver 550.54.15", "whl/cu126"),
        (NEW_DRIVER, None, "torch 2.13.0+cpu is a CPU build: GPU instances need a CUDA build", "whl/cu130"),
        (CPU_RUN, None, None, None),  # a CPU run needs no CUDA build
    ],
)
def test_torchs_cuda_build_is_compared_with_the_driver(monkeypatch, serving, cuda, refused, fix) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch(cuda))
    check = engine_check("pt", serving, native=False, where="local")
    if refused is None:
        assert check.passed and check.found == f"torch {fake_torch(cuda).__version__} (" + (
            f"CUDA {cuda} build)" if cuda else "CPU build)"
        )
        return
    assert refused in check.found and fix in check.fix
    assert check.fix.endswith(f"-m pip install {requirement('torch')} --index-url https://download.pytorch.org/{fix}")


def test_onnx_on_a_gpu_needs_the_cuda_provider_or_it_would_serve_on_the_cpu(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "onnxruntime", fake_onnxruntime("CPUExecutionProvider"))
    check = engine_check("onnx", NEW_DRIVER, native=False, where="local")
    assert "has no CUDAExecutionProvider (it has CPUExecutionProvider): it would serve on the CPU" in check.found
    assert check.fix == f"{PYTHON} -m pip uninstall -y onnxruntime && {PYTHON} -m pip install onnxruntime-gpu"
    assert engine_check("onnx", CPU_RUN, native=False, where="local").passed  # the CPU provider serves a CPU run
    monkeypatch.setitem(sys.modules, "onnxruntime", fake_onnxruntime("CUDAExecutionProvider", "CPUExecutionProvider"))
    found = engine_check("onnx", NEW_DRIVER, native=False, where="local")
    assert found.passed and found.found == "onnxruntime 1.22.0 (CUDAExecutionProvider, CPUExecutionProvider)"


def test_tensorrts_cuda_variant_is_read_from_its_wheel_and_compared_with_the_driver(
    monkeypatch, installed_tensorrt
) -> None:
    monkeypatch.setitem(sys.modules, "torch", fake_torch("12.6"))
    assert tensorrt_cuda() == "13"
    old = engine_check("trt", OLD_DRIVER, native=True, where="docker")
    assert old.found.startswith("TensorRT 10.13.3.9 is a CUDA 13 build, which needs NVIDIA driver R580 or newer")
    assert old.fix.endswith(f"-m pip install '{requirement('tensorrt').replace('tensorrt', 'tensorrt-cu12')}'")
    new = engine_check("trt", NEW_DRIVER, native=True, where="docker")
    assert new.passed and new.found == "tensorrt 10.13.3.9 (CUDA 13 build)"
    local = engine_check("trt", OLD_DRIVER, native=False, where="local")  # the runner: TensorRT, then torch
    assert not local.passed and local.found == old.found


def test_a_tensorrt_that_does_not_import_says_why(monkeypatch) -> None:
    class Broken:
        def find_spec(self, name, path=None, target=None):
            if name == "tensorrt":
                raise OSError("libnvinfer.so.10: cannot open shared object file")
            return None

    monkeypatch.delitem(sys.modules, "tensorrt", raising=False)
    monkeypatch.setattr(sys, "meta_path", [Broken(), *sys.meta_path])
    check = engine_check("trt", NEW_DRIVER, native=True, where="docker")
    assert check.found == "tensorrt does not import: libnvinfer.so.10: cannot open shared object file"
    assert "pip install" in check.fix


LOCAL = {
    "name": "engines",
    "model": {"source": "bert", "architecture": {"layers": 1, "hidden": 32, "heads": 2, "intermediate": 64}},
    "payload": {"sequence_length": 16},
    "variants": {"optimizations": ["pt", "openvino"], "dynamic_batching": [False], "max_batch_sizes": [4]},
    "target": {"kind": "local"},
    "traffic": {"warmup_seconds": 0, "phases": [{"initial_users": 1, "duration_seconds": 2}]},
}


def test_the_job_skips_candidates_whose_engine_is_missing_before_any_server_starts(tmp_path, monkeypatch) -> None:
    """A GPU host (fake NVML: driver 550, CUDA 12.4) with this CPU build of torch and no openvino: both candidates are
    skipped with the fix, nothing is exported and no server starts; the run goes on (and ends) cleanly."""
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["NVIDIA H100"]))
    monkeypatch.setitem(sys.modules, "openvino", None)
    monkeypatch.setitem(sys.modules, "torch", fake_torch(None))
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    spec = ExperimentSpec.model_validate(LOCAL)
    options = JobOptions(run_root=tmp_path / "runs", cache_dir=tmp_path / "artifacts")
    results = {r.name: r for r in Job(spec, store, options, Recorder()).run()}
    pt, openvino = results["pt-nodb-ig1-mbs4"], results["openvino-nodb-ig1-mbs4"]
    assert (pt.status, openvino.status) == ("skipped", "skipped")
    assert pt.reason.startswith("torch 2.13.0+cpu is a CPU build: GPU instances need a CUDA build: ")
    assert "--index-url https://download.pytorch.org/whl/cu126" in pt.reason  # a CUDA 12 build for driver 550
    assert openvino.reason == f"openvino is not installed for {PYTHON}: {PYTHON} -m pip install " + (
        f"'{requirement('openvino')}'"
    )
    assert not (tmp_path / "artifacts").exists() and list((tmp_path / "runs").rglob("server.log")) == []


def image(tensorrt: str | None) -> ImageVersions:
    return ImageVersions("recommender-triton:24.10", "24.10" if tensorrt else None, tensorrt)


def test_a_tensorrt_engine_is_refused_unless_the_image_is_labelled_with_this_hosts_tensorrt(monkeypatch) -> None:
    """A plan loads only on the TensorRT release that built it: the host's tensorrt against the image's label."""
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.13.3.9"))
    other = engine_check("trt", OLD_DRIVER, native=True, where="docker", image=image("10.5.0.18"))
    assert other.found == (
        "this host's TensorRT 10.13.3.9 builds engines that image recommender-triton:24.10's TensorRT 10.5.0.18 "
        "cannot load"
    )
    assert other.fix.startswith(f"{PYTHON} -m pip install tensorrt==10.5.0 (or serve from an image built on")
    unlabelled = engine_check("trt", OLD_DRIVER, native=True, where="docker", image=image(None))
    assert "does not label its TensorRT version (org.recommender.tensorrt)" in unlabelled.found
    assert unlabelled.fix.endswith("docker build -t recommender-triton:24.10 containers/triton")
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.5.0"))
    assert engine_check("trt", OLD_DRIVER, native=True, where="docker", image=image("10.5.0.18")).passed


DOCKER = {
    **LOCAL,
    "variants": {"optimizations": ["trt", "openvino"], "dynamic_batching": [True], "max_batch_sizes": [4]},
    "target": {"kind": "docker", "accelerator": "gpu"},
}


def test_the_job_skips_what_the_images_tensorrt_and_openvino_backend_cannot_serve(tmp_path, monkeypatch) -> None:
    """The docker target on a GPU host (fake NVML, fake docker): the image is labelled TensorRT 10.5.0.18 and this
    host has 10.13.3.9, so trt is skipped before any engine is built; openvino with dynamic batching is skipped with
    the reason (its native backend serves max_batch_size 0). Nothing is exported and no container starts."""
    fake = install_fake_docker(tmp_path / "bin", monkeypatch)
    (fake / "image.out").write_text(json.dumps({TRITON_LABEL: "24.10", TENSORRT_LABEL: "10.5.0.18"}))
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(["NVIDIA H100"]))
    monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__="10.13.3.9"))
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    options = JobOptions(run_root=tmp_path / "runs", cache_dir=tmp_path / "artifacts")
    results = {r.name: r for r in Job(ExperimentSpec.model_validate(DOCKER), store, options, Recorder()).run()}
    trt, openvino = results["trt-db-ig1-mbs4"], results["openvino-db-ig1-mbs4"]
    assert (trt.status, openvino.status) == ("skipped", "skipped")
    assert trt.reason.startswith("this host's TensorRT 10.13.3.9 builds engines that image recommender-triton:24.10")
    assert "Triton's openvino backend rejects any request whose batch differs from max_batch_size" in openvino.reason
    assert "set variants.dynamic_batching: [false] for openvino" in openvino.reason
    assert not (tmp_path / "artifacts").exists() and not any(call.startswith("run ") for call in calls(fake))
