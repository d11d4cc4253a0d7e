"""The reuse key: everything that shapes a measurement changes it; decisions never do."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from recommender.job.protocol import protocol_fingerprint, software_versions
from recommender.modelrepo.model_source import file_sha256
from recommender.spec import ExperimentSpec

VERSIONS = {
    "nvidia-pytriton": "0.7.0",
    "torch": "2.5.0",
    "onnxruntime": "1.20.0",
    "transformers": "4.46.0",
    "locust": "2.32.0",
    "geventhttpclient": "2.3.1",
}


def key(document: dict[str, Any], versions: dict = VERSIONS) -> str:
    return protocol_fingerprint(ExperimentSpec.model_validate({"name": "p"} | document), versions)


def merged(base: dict, change: dict) -> dict:
    out = dict(base)
    for name, value in change.items():
        out[name] = merged(base.get(name, {}), value) if isinstance(value, dict) else value
    return out


BASE: dict[str, Any] = {
    "target": {"kind": "docker", "instance_type": "local-gpu", "gpus": "all"},
    "traffic": {"phases": [{"initial_users": 1, "duration_seconds": 20}]},
}


@pytest.mark.parametrize(
    "change",
    [
        {"latency_threshold": {"ms": 50, "percentile": "p99"}},
        {"max_error_rate": 0.05},
        {"objectives": {"cost": "highest"}},
        {"capacity": {"target_invocations_per_minute": 1000}},
        {"target": {"price_per_hour": 3.0, "priced_as": "ml.g5.xlarge", "budget_usd": 10.0}},
        {"traffic": {"stability": {"tolerance": 0.02}}},
        {"traffic": {"stability": {"ipm_tolerance": 0.3}}},
    ],
)
def test_decisions_do_not_change_the_key(change):
    assert key(merged(BASE, change)) == key(BASE)


@pytest.mark.parametrize(
    "change",
    [
        {"traffic": {"repeats": 3}},
        {"traffic": {"window_seconds": 3}},
        {"traffic": {"stability": {"windows": 6}}},  # the stop conditions look at this many windows
        {"traffic": {"stopping": {"latency": False}}},
        {"payload": {"texts": ["other"]}},
        {"payload": {"sequence_length": 64}},
        {"target": {"instance_type": "local-gpu-2"}},
        {"target": {"image_uri": "recommender-triton:25.01"}},
        {"target": {"gpus": "device=1"}},
        {"target": {"kind": "local", "gpus": None}},
    ],
)
def test_what_shapes_the_measurement_changes_the_key(change):
    assert key(merged(BASE, change)) != key(BASE)


def test_software_versions_change_the_key():
    assert key(BASE, VERSIONS | {"torch": "2.6.0"}) != key(BASE)
    assert set(software_versions()) == set(VERSIONS)


def test_the_model_file_bytes_change_the_key_not_its_name(tmp_path: Path):
    model = tmp_path / "model.onnx"
    model.write_bytes(b"weights-1")
    document = {"model": {"source": "onnx", "path": str(model)}}
    before = key(document)
    model.write_bytes(b"weights-2")
    assert key(document) != before
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(b"weights-2")
    assert file_sha256(copy) == file_sha256(model) and file_sha256(tmp_path / "absent") == "missing"


def test_a_model_file_changed_in_place_is_exported_again(tmp_path: Path):
    from recommender.modelrepo.export import export_model
    from recommender.spec import ModelSpec
    from tests.unit.tiny_model import save_pooling_model

    path, spec = tmp_path / "model.pt", ModelSpec(source="torchscript", path=tmp_path / "model.pt")
    exported = []
    for seed in (0, 1):
        save_pooling_model(path, seed)
        exported.append(export_model(spec, "pt", 8, "same-spec", tmp_path / "cache").path)
    assert exported[0].parent != exported[1].parent
    assert exported[1].read_bytes() == path.read_bytes()


@pytest.mark.parametrize(
    ("optimizations", "engines"),
    [(["pt", "onnx"], set()), (["openvino"], {"openvino"}), (["trt", "openvino", "pt"], {"openvino", "tensorrt"})],
)
def test_engine_versions_are_in_the_key_of_experiments_that_use_them(optimizations, engines):
    assert set(software_versions(optimizations)) == set(VERSIONS) | engines


@pytest.mark.parametrize(("optimization", "distribution"), [("openvino", "openvino"), ("trt", "tensorrt")])
def test_an_engine_version_change_changes_the_key(optimization, distribution):
    document = merged(BASE, {"variants": {"optimizations": [optimization]}})
    assert key(document, VERSIONS | {distribution: "1.0"}) != key(document, VERSIONS | {distribution: "2.0"})


def test_the_installed_openvino_version_is_read_for_an_openvino_experiment():
    import importlib.metadata

    spec = ExperimentSpec.model_validate({"name": "p", "variants": {"optimizations": ["openvino"]}})
    installed = {name: version for name, version in software_versions(["openvino"]).items()}
    assert installed["openvino"] == importlib.metadata.version("openvino")
    assert protocol_fingerprint(spec) == protocol_fingerprint(spec, installed)


def test_the_load_client_its_version_and_the_host_hardware_are_in_the_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Measured otherwise, never reused: another load client (2.3x per core apart), another geventhttpclient, another
    CPU behind the same instance_type label."""
    import recommender.job.protocol as protocol
    from recommender.hardware import Hardware

    spec = ExperimentSpec.model_validate({"name": "p"} | BASE)
    client = VERSIONS | {"geventhttpclient": "2.3.1"}
    base = protocol_fingerprint(spec, client)
    assert protocol_fingerprint(spec, client | {"geventhttpclient": "2.3.3"}) != base
    assert "geventhttpclient" in software_versions()
    xeon, epyc = Hardware("Intel Xeon", 2), Hardware("AMD EPYC", 2)
    assert protocol_fingerprint(spec, client, host=xeon) == protocol_fingerprint(spec, client, host=xeon) != base
    assert protocol_fingerprint(spec, client, host=xeon) != protocol_fingerprint(spec, client, host=epyc)
    assert protocol_fingerprint(spec, client, host=xeon) != protocol_fingerprint(
        spec, client, host=Hardware("Intel Xeon", 4)
    )
    monkeypatch.setattr(protocol, "DEFAULT_CLIENT", "fasthttp")
    assert protocol_fingerprint(spec, client) != base


def test_the_tensorrt_version_is_read_from_the_module_whatever_wheel_installed_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pip installs TensorRT as `tensorrt-cu13` (no `tensorrt` distribution): its version is `tensorrt.__version__`, so
    runs measured with TensorRT 10.13 are not reused under 10.14 (issue 23 item 12)."""
    info = tmp_path / "site" / "tensorrt_cu13-10.13.3.9.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tensorrt_cu13\nVersion: 10.13.3.9\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    spec = ExperimentSpec.model_validate({"name": "p", "variants": {"optimizations": ["trt"]}})
    keys = []
    for version in ("10.13.3.9", "10.14.1.48"):
        monkeypatch.setitem(sys.modules, "tensorrt", SimpleNamespace(__version__=version))
        assert software_versions(["trt"])["tensorrt"] == version
        keys.append(protocol_fingerprint(spec))
    assert keys[0] != keys[1]
