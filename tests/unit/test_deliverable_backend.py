"""The export serves a candidate the way its run was measured: the stored backend and accelerator pick the
repository."""

from __future__ import annotations

import pytest

from recommender.candidates import CandidateResult
from recommender.report.deliverable import Served


def stored(key: str, backend: str | None, accelerator: str | None) -> CandidateResult:
    hardware = {"accelerator": accelerator} if accelerator else None
    return CandidateResult(key, "c", {}, "ok", None, None, None, 1, None, None, hardware=hardware, backend=backend)


@pytest.mark.parametrize(
    ("backend", "accelerator", "native", "kind"),
    [
        ("onnxruntime_onnx", "gpu", True, "KIND_GPU"),
        ("tensorrt_plan", "gpu", True, "KIND_GPU"),
        ("python:onnxruntime", "cpu", False, "KIND_CPU"),
        ("openvino", "cpu", True, "KIND_CPU"),
        (None, None, False, "KIND_CPU"),  # a run stored before backends were recorded: the Python backend, as then
    ],
)
def test_the_measured_backend_and_accelerator_pick_the_repository(backend, accelerator, native, kind) -> None:
    served = Served.of("k2", [stored("k1", "pytorch_libtorch", "gpu"), stored("k2", backend, accelerator)])
    assert (served.backend, served.native, served.instance_kind) == (backend, native, kind)


def test_without_stored_runs_the_export_is_the_python_backend_on_cpu() -> None:
    served = Served.of("k", None)
    assert (served.native, served.instance_kind) == (False, "KIND_CPU")
