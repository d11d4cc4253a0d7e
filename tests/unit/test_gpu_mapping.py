"""Which of this host's GPUs a local or docker target serves on, and how a server is given them (issue 23 items 8, 9):
NVML indices are not CUDA ordinals, so GPUs are named by UUID; CUDA_VISIBLE_DEVICES and docker's `--gpus` are read as
CUDA and the docker CLI read them. A fake NVML module and a fake `docker` executable stand at the process boundary."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path

import pytest

from recommender.hardware import (
    Gpu,
    Hardware,
    HardwareMissing,
    cuda_environment,
    docker_gpus,
    serving_hardware,
    visible_gpus,
)
from recommender.job.pipeline import Job, JobOptions
from recommender.spec import ExperimentSpec, TargetSpec
from recommender.store.results import ResultStore
from recommender.targets.docker import TENSORRT_LABEL, TRITON_LABEL, DockerTarget
from tests.fake_docker import calls, install_fake_docker
from tests.fake_nvml import FakeGpu, FakeNvml
from tests.unit.test_pipeline_budget import Recorder
from tests.unit.tiny_model import save_onnx, save_pooling_model

H100 = [Gpu(i, "NVIDIA H100", 81559.0, uuid=f"GPU-{name}") for i, name in enumerate(("aaaa", "bbbb", "cccc"))]
MIXED = [H100[0], Gpu(1, "NVIDIA L4", 23034.0, uuid="GPU-dddd")]


def host(gpus: list[Gpu]) -> Hardware:
    return Hardware("Test CPU", 16, tuple(gpus), "550.54.15", "12.4", f"{len(gpus)} GPU(s)")


@pytest.mark.parametrize(
    "environ, expected",
    [
        ({}, (0, 1, 2)),  # unset: every GPU, in PCI (NVML) order
        ({"CUDA_VISIBLE_DEVICES": "2,0", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}, (2, 0)),  # CUDA's order is the list's
        ({"CUDA_VISIBLE_DEVICES": "GPU-cc"}, (2,)),  # a UUID prefix, as CUDA accepts
        ({"CUDA_VISIBLE_DEVICES": "1,7,0"}, (1,)),  # CUDA stops at the first entry naming no device
        ({"CUDA_VISIBLE_DEVICES": ""}, ()),
    ],
)
def test_cuda_visible_devices_is_read_as_cuda_reads_it(environ, expected) -> None:
    assert tuple(gpu.index for gpu in visible_gpus(tuple(H100), environ)) == expected


def test_indices_under_fastest_first_on_mixed_gpus_are_refused_as_ambiguous() -> None:
    with pytest.raises(HardwareMissing, match=r"CUDA_VISIBLE_DEVICES='1' names GPUs by index") as caught:
        visible_gpus(tuple(MIXED), {"CUDA_VISIBLE_DEVICES": "1"})
    assert caught.value.exit_code == 2 and "nvidia-smi -L" in (caught.value.hint or "")
    both = {"CUDA_VISIBLE_DEVICES": "1", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    assert visible_gpus(tuple(MIXED), both) == (MIXED[1],)


@pytest.mark.parametrize(
    "option, expected",
    [
        (None, ()),  # documented as CPU only
        ("all", (0, 1, 2)),
        ("device=all", (0, 1, 2)),
        ("2", (0, 1)),  # a count: the first N, as docker's NVIDIA runtime gives them
        ('"device=2,0"', (0, 2)),  # the container sees them in PCI order
        ("device=GPU-bbbb", (1,)),
        ('"capabilities=compute,utility"', (0,)),  # neither count nor device: docker asks for one GPU
        ("capabilities=all", (0,)),
    ],
)
def test_docker_gpus_option_is_read_as_the_docker_cli_reads_it(option, expected) -> None:
    assert tuple(gpu.index for gpu in docker_gpus(option, tuple(H100))) == expected


@pytest.mark.parametrize(
    ("option", "said"), [("device=5", "names GPU '5'"), ("count=9", r"asks for 9 GPU\(s\) and this host has 3")]
)
def test_a_docker_gpus_option_beyond_this_host_is_refused(option, said) -> None:
    with pytest.raises(HardwareMissing, match=said):
        docker_gpus(option, tuple(H100))


def test_docker_gpus_null_serves_on_the_cpu_and_gpu_with_it_is_refused() -> None:
    null = TargetSpec(kind="docker", gpus=None)
    served = serving_hardware(null, host(H100))
    assert served.accelerator == "cpu" and served.hardware.gpus == ()
    assert served.hardware.gpu_status == "no GPU (target.gpus is null (CPU only): the container gets no GPU)"
    with pytest.raises(HardwareMissing, match=r"target.accelerator is gpu but target.gpus is null") as caught:
        serving_hardware(null.model_copy(update={"accelerator": "gpu"}), host(H100))
    assert caught.value.exit_code == 2 and "target.gpus: all" in (caught.value.hint or "")


def test_a_local_target_serves_on_what_cuda_visible_devices_leaves(monkeypatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-bbbb")
    served = serving_hardware(TargetSpec(), host(H100))
    assert served.accelerator == "gpu" and served.hardware.gpus == (H100[1],)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert serving_hardware(TargetSpec(), host(H100)).accelerator == "cpu"


def test_a_server_is_given_its_gpus_by_uuid_in_pci_order() -> None:
    assert cuda_environment((H100[2], H100[0])) == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "GPU-cccc,GPU-aaaa",
    }
    assert cuda_environment(())["CUDA_VISIBLE_DEVICES"] == ""  # a CPU server sees no GPU


def test_a_container_gets_exactly_its_gpus_by_uuid() -> None:
    arguments = DockerTarget(run_id="r1").run_arguments("recommender-ab", Path("/repo"), (8000, 8002), (H100[1],))
    at = arguments.index("--gpus")
    assert arguments[at : at + 6] == [
        "--gpus",
        '"device=GPU-bbbb"',
        "--env",
        "CUDA_DEVICE_ORDER=PCI_BUS_ID",
        "--env",
        "CUDA_VISIBLE_DEVICES=GPU-bbbb",
    ]
    assert "--gpus" not in DockerTarget(run_id="r1").run_arguments("recommender-ab", Path("/repo"), (8000, 8002), ())


@pytest.fixture
def two_gpu_host(tmp_path, monkeypatch) -> Path:
    """This host seen through a fake NVML with two H100s, and a fake docker engine whose containers never answer."""
    gpus = [FakeGpu("NVIDIA H100", "GPU-aaaa"), FakeGpu("NVIDIA H100", "GPU-bbbb")]
    monkeypatch.setitem(sys.modules, "pynvml", FakeNvml(gpus))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("CUDA_DEVICE_ORDER", raising=False)
    return install_fake_docker(tmp_path / "bin", monkeypatch)


def run_docker_job(tmp_path: Path, gpus: str | None) -> Path:
    """A pt candidate with 2 instances on the docker target with `gpus`; returns its config.pbtxt (the deploy itself
    fails: the fake engine serves no HTTP)."""
    spec = ExperimentSpec.model_validate(
        {
            "name": "gpu-map",
            "model": {"source": "torchscript", "path": str(save_pooling_model(tmp_path / "model.pt"))},
            "variants": {"optimizations": ["pt"], "dynamic_batching": [False], "instance_group_counts": [2]},
            "target": {"kind": "docker", "gpus": gpus, "ready_timeout_seconds": 0.5},
        }
    )
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    options = JobOptions(run_root=tmp_path / "runs", cache_dir=tmp_path / "cache")
    (result,) = Job(spec, store, options, Recorder()).run()
    assert result.status == "failed"
    (config,) = (tmp_path / "runs").glob("gpu-map/*/repository/model/config.pbtxt")
    return config


def test_docker_device_1_is_the_containers_gpu_0(two_gpu_host, tmp_path) -> None:
    config = run_docker_job(tmp_path, "device=1").read_text()
    assert "count: 2\n    kind: KIND_GPU\n    gpus: [ 0 ]\n  }\n]" in config  # both instances on its only GPU
    run = next(call for call in calls(two_gpu_host) if call.startswith("run "))
    assert '--gpus "device=GPU-bbbb" --env CUDA_DEVICE_ORDER=PCI_BUS_ID --env CUDA_VISIBLE_DEVICES=GPU-bbbb' in run


def test_docker_gpus_null_writes_kind_cpu_and_gives_no_gpu(two_gpu_host, tmp_path) -> None:
    config = run_docker_job(tmp_path, None).read_text()
    assert "KIND_CPU" in config and "KIND_GPU" not in config
    assert not any("--gpus" in call for call in calls(two_gpu_host))


FAKE_TENSORRT = '''"""TensorRT 10 as build_engine calls it; the engine it writes says where it was built."""
import json
import os

__version__ = "10.13.3.9"


class Logger:
    WARNING = 2

    def __init__(self, level):
        pass


class NetworkDefinitionCreationFlag:
    EXPLICIT_BATCH = 0


class BuilderFlag:
    FP16 = "FP16"


class MemoryPoolType:
    WORKSPACE = "WORKSPACE"


class OnnxParser:
    num_errors = 0

    def __init__(self, network, logger):
        pass

    def parse(self, data):
        return True


class Builder:
    def __init__(self, logger):
        pass

    def create_network(self, flags):
        return object()

    def create_optimization_profile(self):
        return type("Profile", (), {"set_shape": lambda self, *shapes: None})()

    def create_builder_config(self):
        methods = ("add_optimization_profile", "set_flag", "set_memory_pool_limit")
        return type("Config", (), {name: lambda self, *arguments: None for name in methods})()

    def build_serialized_network(self, network, config):
        names = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
        return json.dumps({name: os.environ.get(name) for name in names} | {"pid": os.getpid()}).encode()
'''


@pytest.fixture
def fake_tensorrt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A `tensorrt` module on disk, for this process and its children (the engine build's child imports it)."""
    folder = tmp_path / "fake-tensorrt"
    folder.mkdir()
    (folder / "tensorrt.py").write_text(FAKE_TENSORRT)
    spec = importlib.util.spec_from_file_location("tensorrt", folder / "tensorrt.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setitem(sys.modules, "tensorrt", module)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])))


def save_onnx_model(path: Path) -> Path:
    import torch

    class Pooling(torch.nn.Module):
        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
            return (input_ids * attention_mask).to(torch.float32).sum(dim=1, keepdim=True)

    return save_onnx(Pooling(), path, ["input_ids", "attention_mask"], {0: "batch", 1: "seq"})


def test_each_trt_engine_is_built_on_its_candidates_gpu(two_gpu_host, fake_tensorrt, tmp_path) -> None:
    """Two trt candidates side by side on a two-GPU host (a slot per GPU): each engine is built in a child process
    given only the GPU its container serves on, by UUID in PCI order, never on this process's CUDA device 0 (issue 23
    item 11)."""
    spec = ExperimentSpec.model_validate(
        {
            "name": "gpu-build",
            "max_parallel": 2,
            "model": {"source": "onnx", "path": str(save_onnx_model(tmp_path / "model.onnx"))},
            "variants": {"optimizations": ["trt"], "precisions": ["fp32", "fp16"], "dynamic_batching": [False]},
            "target": {"kind": "docker", "gpus": "all", "ready_timeout_seconds": 0.5},
        }
    )
    labels = {TRITON_LABEL: "24.10", TENSORRT_LABEL: "10.13.3.9"}  # the image serves this host's TensorRT
    (two_gpu_host / "image.out").write_text(json.dumps(labels))
    store = ResultStore.open(f"sqlite:///{tmp_path / 'results.db'}")
    results = Job(spec, store, JobOptions(run_root=tmp_path / "runs", cache_dir=tmp_path / "cache"), Recorder()).run()
    assert [r.status for r in results] == ["failed", "failed"], [r.reason for r in results]  # the fake serves no HTTP
    runs = [shlex.split(call) for call in calls(two_gpu_host) if call.startswith("run ")]
    assert len(runs) == 2
    for arguments in runs:
        repository = Path(arguments[arguments.index("--volume") + 1].split(":")[0])
        served_on = arguments[arguments.index("--gpus") + 1]
        built = json.loads((repository / "model" / "1" / "model.plan").read_bytes())
        assert served_on == f"device={built['CUDA_VISIBLE_DEVICES']}"
        assert built["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and built["pid"] != os.getpid()
