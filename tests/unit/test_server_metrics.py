"""Server-side sampling (fake deployment at the process boundary) and Prometheus parsing."""

import importlib.util
import os
import time

import pytest

from recommender.metrics.host import NO_GPU_HERE, Sample, ServerSampler, gpu_probe, window_figures
from recommender.metrics.prometheus import counter_delta, parse_counters
from tests.fake_nvml import FakeGpu, FakeNvml


def snapshot(success: int, queue_ns: int, infer_ns: int, executions: int) -> dict:
    part = lambda ns: {"count": success, "ns": ns}
    return {
        "model_stats": [
            {
                "inference_count": success,
                "execution_count": executions,
                "inference_stats": {
                    "success": part(0),
                    "fail": {"count": 0, "ns": 0},
                    "queue": part(queue_ns),
                    "compute_input": part(0),
                    "compute_infer": part(infer_ns),
                    "compute_output": part(0),
                },
            }
        ]
    }


class FakeDeployment:
    """This test process stands in for the server tree; statistics grow by 10 requests per call; its model runs on
    the GPUs named by `gpu_uuids`."""

    def __init__(self, gpu_uuids: tuple[str, ...] = ()) -> None:
        self.calls, self.gpu_uuids = 0, gpu_uuids

    def server_pids(self) -> list[int]:
        return [os.getpid()]

    def statistics(self) -> dict:
        self.calls += 1
        return snapshot(10 * self.calls, 1_000_000 * self.calls, 5_000_000 * self.calls, 5 * self.calls)


def test_sampler_records_the_process_tree_and_statistics_each_interval():
    with ServerSampler(FakeDeployment(), interval_s=0.05) as sampler:
        time.sleep(0.3)
    samples = sampler.samples
    assert len(samples) >= 4
    assert all(s.rss_bytes > 0 and s.processes == 1 for s in samples)
    assert samples[-1].statistics["model_stats"][0]["inference_count"] >= 40


def test_a_mig_gpu_without_utilisation_keeps_the_sampler_and_every_other_figure():
    mig = FakeGpu("NVIDIA A100 MIG", "GPU-mig", memory_used=3 * 2**30, power_mw=90_000, mig=True)
    with ServerSampler(FakeDeployment(("GPU-mig",)), interval_s=0.05, nvml=FakeNvml([mig])) as sampler:
        time.sleep(0.3)
    samples = sampler.samples
    assert len(samples) >= 4 and all(s.rss_bytes > 0 and s.statistics for s in samples)  # the thread lived on
    assert all(s.gpu == {"memory_used_bytes": 3 * 2**30, "power_w": 90.0} for s in samples)
    assert sampler.gpu_status == "1 GPU(s); MIG: utilisation unsupported"
    window = window_figures(samples, samples[0].at, 0.0, 10.0)
    assert window["gpu_utilization_percent"] is None and window["gpu_memory_mb"] == 3 * 1024


def test_only_the_deployments_own_gpus_are_sampled():
    """Two candidates side by side (max_parallel 2), one per GPU: each reports its GPU's load, not the host's."""
    busy = FakeGpu("NVIDIA H100", "GPU-busy", utilisation=95.0, memory_used=40 * 2**30, power_mw=600_000)
    mine = FakeGpu("NVIDIA H100", "GPU-mine", utilisation=20.0, memory_used=2 * 2**30, power_mw=150_000)
    nvml = FakeNvml([busy, mine])
    with ServerSampler(FakeDeployment(("GPU-mine",)), interval_s=0.05, nvml=nvml) as sampler:
        time.sleep(0.15)
    assert {tuple(sorted(s.gpu.items())) for s in sampler.samples} == {
        (("memory_used_bytes", 2 * 2**30), ("power_w", 150.0), ("utilization_percent", 20.0))
    }
    assert set(nvml.queried) == {"GPU-mine"} and sampler.gpu_status == "1 GPU(s)"


def test_a_deployment_on_no_gpu_of_this_host_samples_none():
    """A CPU candidate, or an endpoint elsewhere, on a host with GPUs: the host's GPUs are not its figures."""
    nvml = FakeNvml([FakeGpu("NVIDIA H100", "GPU-other", utilisation=80.0)])
    with ServerSampler(FakeDeployment(), interval_s=0.05, nvml=nvml) as sampler:
        time.sleep(0.1)
    assert all(s.gpu is None for s in sampler.samples) and nvml.queried == []
    assert sampler.gpu_status == "no GPU (no GPU of this host serves the model)"


def test_window_figures_are_deltas_between_the_snapshots_around_the_window():
    # snapshots at 0, 1, 2, 3 s after start; window [1, 3): from the 1 s snapshot to the 3 s one: 20 requests,
    # 2 ms queue and 10 ms infer in total -> 100 us queue and 500 us infer per request; 10 executions -> batch 2
    samples = [
        Sample(100.0 + t, 50.0 + t, 2**20 * (10 + t), 2, snapshot(10 * t, 1_000_000 * t, 5_000_000 * t, 5 * t), None)
        for t in range(4)
    ]
    figures = window_figures(samples, started_at=100.0, start_s=1.0, end_s=3.0)
    assert figures["queue_us"] == pytest.approx(100.0) and figures["compute_infer_us"] == pytest.approx(500.0)
    assert (figures["executions"], figures["inferences"], figures["avg_batch_size"]) == (10, 20, 2.0)
    assert figures["server_cpu_percent"] == pytest.approx(51.5)  # samples at 1 and 2 s: 51 and 52 %
    assert figures["server_rss_mb"] == 12 and figures["gpu_utilization_percent"] is None


def test_no_gpu_is_recorded_not_fatal():
    """The one outcome this host must give, from facts found apart from the probe: the package, the driver."""
    no_uuids, none_here = gpu_probe()
    assert (no_uuids, none_here.text) == (None, f"no GPU ({NO_GPU_HERE})")  # nothing to sample: NVML not touched
    read, probed = gpu_probe(("GPU-00000000-0000-0000-0000-000000000000",))
    status = probed.text
    if importlib.util.find_spec("pynvml") is None:
        assert (read, status) == (None, "no GPU (nvidia-ml-py not installed)")
    else:  # without a driver NVML fails to initialise; with one, the made-up UUID names no GPU: either says why
        assert read is None and status.startswith("no GPU (") and "not installed" not in status


METRICS = """# HELP nv_inference_request_success Number of successful inference requests
# TYPE nv_inference_request_success counter
nv_inference_request_success{model="model",version="1"} 120
nv_inference_request_success{model="other",version="1"} 30
nv_inference_queue_duration_us{model="model",version="1"} 6000
nv_inference_compute_infer_duration_us{model="model",version="1"} 1.5e5
nv_gpu_utilization{gpu_uuid="x"} 0.5
"""


def test_prometheus_counters_are_summed_over_labels_and_differenced():
    after = parse_counters(METRICS)
    assert after == {
        "nv_inference_request_success": 150,
        "nv_inference_queue_duration_us": 6000,
        "nv_inference_compute_infer_duration_us": 150000,
    }
    before = {
        "nv_inference_request_success": 50,
        "nv_inference_queue_duration_us": 1000,
        "nv_inference_compute_infer_duration_us": 50000,
    }
    delta = counter_delta(before, after)
    assert delta["nv_inference_request_success"] == 100 and delta["avg_queue_duration_us"] == 50
    assert delta["avg_compute_infer_duration_us"] == 1000
    assert counter_delta(None, after) == {"available": False}
