"""GPU figures of a stored run in words (report and dashboard) and as a per-window frame and chart (curves page)."""

from __future__ import annotations

import pytest

from dashboard.gpu import gpu_chart, gpu_frame, served_lines
from recommender.candidates import CandidateResult

GPU_AT_MAX = {
    "gpu": "1 GPU(s)",
    "at_max_invocations": {
        "gpu_utilization_percent": 63.2,
        "gpu_memory_mb": 1234.0,
        "gpu_power_w": 71.4,
        "queue_us": 10.0,
    },
}
HARDWARE = {
    "accelerator": "gpu",
    "declared": None,
    "cpu_model": "Intel Xeon",
    "cpu_cores": 8,
    "driver_version": "550.54",
    "cuda_version": "12.4",
    "gpu_status": "1 GPU(s)",
    "gpus": [{"index": 0, "name": "NVIDIA A10G", "memory_mb": 23028.0}],
}


def result(server_stats=None, hardware=None, backend=None) -> CandidateResult:
    return CandidateResult(
        "k",
        "trt-fp16-db-ig1-mbs8",
        {},
        "ok",
        None,
        None,
        server_stats,
        1,
        None,
        None,
        hardware=hardware,
        backend=backend,
    )


@pytest.mark.parametrize(
    ("stats", "expected"),
    [
        (GPU_AT_MAX, "63 % utilisation, 1,234 MiB used, 71 W"),
        (
            {"gpu": "no GPU (nvidia-ml-py not installed)", "at_max_invocations": {"gpu_utilization_percent": None}},
            "no GPU (nvidia-ml-py not installed)",
        ),
        ({"gpu": "1 GPU(s)", "at_max_invocations": {}}, "1 GPU(s), no GPU figures at MaxInvocations"),
        (
            {"gpu": "1 GPU(s); MIG: utilisation unsupported", "at_max_invocations": {"gpu_memory_mb": 1234.0}},
            "1,234 MiB used (MIG: utilisation unsupported)",
        ),
        ({}, None),
        (None, None),
    ],
)
def test_describe_gpu(stats, expected) -> None:
    from recommender.hardware import describe_gpu

    assert describe_gpu(stats) == expected


def test_served_lines_show_hardware_backend_and_gpu() -> None:
    line, bare = served_lines([result(GPU_AT_MAX, HARDWARE, "tensorrt_plan"), result()])
    assert line == (
        "trt-fp16-db-ig1-mbs8: gpu (Intel Xeon, 8 cores; 1 x NVIDIA A10G (23028 MiB), driver 550.54, CUDA "
        "12.4), backend tensorrt_plan; GPU at MaxInvocations: 63 % utilisation, 1,234 MiB used, 71 W"
    )
    assert bare == "trt-fp16-db-ig1-mbs8: hardware not recorded (run stored before it was)"


def test_gpu_frame_has_one_point_per_window_and_figure() -> None:
    rows = [
        {"start_s": 10.0, "end_s": 20.0, "gpu_utilization_percent": 50.0, "gpu_memory_mb": 900.0, "gpu_power_w": None},
        {"start_s": 20.0, "end_s": 30.0, "gpu_utilization_percent": 70.0, "gpu_memory_mb": 950.0, "gpu_power_w": 80.0},
        {"start_s": None, "end_s": None, "gpu_utilization_percent": 99.0},
    ]
    frame = gpu_frame(result(), rows)
    assert len(frame) == 5 and set(frame["second"]) == {15.0, 25.0}
    assert frame[frame["figure"] == "power (W)"]["value"].tolist() == [80.0]
    spec = gpu_chart(frame).to_dict()
    assert spec["facet"]["row"]["field"] == "figure"


def test_a_cpu_run_has_an_empty_gpu_frame() -> None:
    rows = [{"start_s": 0.0, "end_s": 5.0, "gpu_utilization_percent": None, "gpu_memory_mb": None, "gpu_power_w": None}]
    assert gpu_frame(result(), rows).empty
