"""First contact with a GPU host: the NVML paths recommender takes, on the real driver (docs/gpu.md).

    python3 scripts/gpu_contact.py      # exit 0: every check below passed; 1: one failed (printed); 2: no GPU here
    python3 scripts/gpu_contact.py --serve REPO   # also 6: serve REPO (a KIND_GPU Python-backend repository)

Needs only the standard library, psutil, nvidia-ml-py and torch with CUDA (no Triton, no registry), so it runs on a
bare GPU machine with the repository copied onto it. It checks, printing each figure:
  1. detect_hardware(): the GPUs NVML reports (name, memory, UUID, MIG), the driver and its CUDA version;
  2. cuda_mismatch() for this torch build against that driver (None: the build runs here);
  3. the server sampler's GPU reader (metrics/host.py gpu_probe) on the first GPU: idle, then while torch multiplies
     matrices on it: utilisation must rise above 0, memory used must grow, power must be read;
  4. the UUID mapping: a child given cuda_environment(the last GPU) sees exactly one CUDA device, and its UUID is
     that GPU's NVML UUID (what a local server and a TensorRT build child are given);
  5. onnxruntime's providers (CUDAExecutionProvider present or not: the ONNX runner on KIND_GPU needs it);
  6. with --serve REPO (needs the nvidia-pytriton wheel too): the wheel's tritonserver, started the way the local
     target starts it (targets/triton_binary.py: its backend folder, environment and stub; the GPU by UUID), serves
     REPO's model "model" (input_ids and attention_mask, INT64): 50 requests answered with finite embeddings, and
     NVML lists the server's backend stubs among the GPU's compute processes. The wheel's backend stub needs numpy 1
     (with numpy 2 every request fails: "output tensor shape does not match size of output").
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.hardware import cuda_environment, cuda_mismatch, detect_hardware
from recommender.metrics.host import gpu_probe

CHILD = (
    "import json, torch; p = torch.cuda.get_device_properties(0); "
    "print(json.dumps({'count': torch.cuda.device_count(), 'name': p.name, 'uuid': 'GPU-' + str(p.uuid)}))"
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--serve", type=Path, help="a KIND_GPU Python-backend repository to serve (check 6)")
    args = parser.parse_args()
    failures: list[str] = []
    hardware = detect_hardware()
    print("1. hardware:", hardware.describe())
    for gpu in hardware.gpus:
        print(f"   GPU {gpu.index}: {gpu.name}, {gpu.memory_mb:.0f} MiB, MIG {gpu.mig}, {gpu.uuid}")
    if not hardware.gpus:
        print("no GPU on this host: nothing to check")
        return 2

    import torch

    print(
        f"2. torch {torch.__version__} (CUDA build {torch.version.cuda}):",
        cuda_mismatch("torch", torch.version.cuda, hardware),
    )

    reader, status = gpu_probe((hardware.gpus[0].uuid,))
    print("3. GPU reader:", status)
    if reader is None:
        failures.append(f"gpu_probe gave no reader: {status}")
    else:
        idle = reader.read()
        stop = threading.Event()

        def load() -> None:
            a = torch.randn(8192, 8192, device="cuda:0")
            while not stop.is_set():
                a = (a @ a).clamp_(-1, 1)
            torch.cuda.synchronize()

        worker = threading.Thread(target=load)
        worker.start()
        time.sleep(3)
        busy = []
        for _ in range(3):
            time.sleep(0.5)
            busy.append(reader.read())
        stop.set()
        worker.join()
        print("   idle:", idle)
        print("   under load:", busy)
        print("   notes:", reader.status())
        if not any(s.get("utilization_percent", 0) > 0 for s in busy):
            failures.append("utilisation never rose above 0 under load")
        if not any(s.get("memory_used_bytes", 0) > idle.get("memory_used_bytes", 0) for s in busy):
            failures.append("memory used did not grow under load")
        if not all("power_w" in s for s in busy):
            failures.append("power was not read")

    last = hardware.gpus[-1]
    env = {**os.environ, **cuda_environment((last,))}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=False)
    print("4. child given", cuda_environment((last,)), "->", out.stdout.strip() or out.stderr.strip()[-300:])
    try:
        seen = json.loads(out.stdout)
        if seen["count"] != 1 or seen["uuid"] != last.uuid:
            failures.append(f"the child saw {seen}, not exactly {last.uuid}")
    except (ValueError, KeyError):
        failures.append("the child printed no device")

    try:
        import onnxruntime

        print(f"5. onnxruntime {onnxruntime.__version__} providers:", onnxruntime.get_available_providers())
    except ImportError as exc:
        print("5. onnxruntime not importable:", exc)

    if args.serve is not None:
        failures += serve(args.serve, hardware.gpus[0])

    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


def serve(repository: Path, gpu: Any) -> list[str]:
    """Check 6: the failures (none: served on the GPU)."""
    import psutil
    import pynvml

    from recommender.targets.server_process import (
        LOOPBACK,
        free_loopback_ports,
        start_in_session,
        stop_session,
    )
    from recommender.targets.triton_binary import (
        preflight,
        prepare_backend_directory,
        server_command,
        server_environment,
    )

    install = preflight()
    run_dir = Path(tempfile.mkdtemp(prefix="gpu-serve-"))
    backends = prepare_backend_directory(install, run_dir)
    http, metrics = free_loopback_ports(2)
    env = {**server_environment(install), **cuda_environment((gpu,))}
    command = server_command(
        install.binary,
        repository.resolve(),
        backends,
        address=LOOPBACK,
        http_port=http,
        metrics_port=metrics,
        exit_timeout_secs=0,
    )
    server = start_in_session(command, env, run_dir, run_dir / "server.log")
    base, failures = f"http://127.0.0.1:{http}", []
    try:
        started = time.monotonic()
        while time.monotonic() - started < 120 and server.poll() is None:
            try:
                urllib.request.urlopen(f"{base}/v2/models/model/ready", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        else:
            return [f"the server was not ready in 120 s: {(run_dir / 'server.log').read_text()[-2000:]}"]
        print(f"6. served: ready in {time.monotonic() - started:.1f} s")
        seq, latencies, width = 16, [], None
        for _ in range(50):
            ids = [101, *(random.randrange(1000, 30000) for _ in range(seq - 2)), 102]
            body = {
                "inputs": [
                    {"name": "input_ids", "shape": [1, seq], "datatype": "INT64", "data": ids},
                    {"name": "attention_mask", "shape": [1, seq], "datatype": "INT64", "data": [1] * seq},
                ]
            }
            request = urllib.request.Request(f"{base}/v2/models/model/infer", data=json.dumps(body).encode())
            sent = time.perf_counter()
            try:
                with urllib.request.urlopen(request, timeout=30) as response:
                    answer = json.loads(response.read())
            except urllib.error.HTTPError as error:  # the server's answer says why
                return [f"request refused: HTTP {error.code} {error.read().decode(errors='replace')[:2000]}"]
            latencies.append((time.perf_counter() - sent) * 1000)
            output = answer["outputs"][0]
            width = output["shape"]
            if not all(abs(value) < 1e30 for value in output["data"]):
                failures.append("an embedding was not finite")
        latencies.sort()
        print(
            f"   50 requests answered, output shape {width}, median {latencies[25]:.2f} ms, max {latencies[-1]:.2f} ms"
        )
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByUUID(gpu.uuid)
        on_gpu = {p.pid: p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle)}
        ours = {p.pid: p.name() for p in psutil.Process(server.pid).children(recursive=True)}
        print(f"   the server's processes {ours}; NVML compute processes (pid: bytes) {on_gpu}")
        stubs_on_gpu = [pid for pid in ours if pid in on_gpu]
        if not stubs_on_gpu:
            failures.append("no process of the server is on the GPU (NVML)")
        else:
            print(f"   {len(stubs_on_gpu)} of the server's processes hold GPU memory")
        lines = urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=5).read().decode()
        gpu_lines = [line for line in lines.splitlines() if line.startswith("nv_gpu_")]
        print(f"   Triton's own GPU metrics: {gpu_lines[:4] or 'none (this build has none)'}")
    finally:
        stop_session(server, stop_timeout=10)  # and its backend stubs
    return failures


if __name__ == "__main__":
    sys.exit(main())
