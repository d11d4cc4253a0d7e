"""First contact with a GPU host: the NVML paths recommender takes, on the real driver (docs/gpu.md).

    python3 scripts/gpu_contact.py      # exit 0: every check below passed; 1: one failed (printed); 2: no GPU here

Needs only the standard library, psutil, nvidia-ml-py and torch with CUDA (no Triton, no registry), so it runs on a
bare GPU machine with the repository copied onto it. It checks, printing each figure:
  1. detect_hardware(): the GPUs NVML reports (name, memory, UUID, MIG), the driver and its CUDA version;
  2. cuda_mismatch() for this torch build against that driver (None: the build runs here);
  3. the server sampler's GPU reader (metrics/host.py gpu_probe) on the first GPU: idle, then while torch multiplies
     matrices on it: utilisation must rise above 0, memory used must grow, power must be read;
  4. the UUID mapping: a child given cuda_environment(the last GPU) sees exactly one CUDA device, and its UUID is
     that GPU's NVML UUID (what a local server and a TensorRT build child are given);
  5. onnxruntime's providers (CUDAExecutionProvider present or not: the ONNX runner on KIND_GPU needs it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from recommender.hardware import cuda_environment, cuda_mismatch, detect_hardware
from recommender.metrics.host import gpu_probe

CHILD = (
    "import json, torch; p = torch.cuda.get_device_properties(0); "
    "print(json.dumps({'count': torch.cuda.device_count(), 'name': p.name, 'uuid': 'GPU-' + str(p.uuid)}))"
)


def main() -> int:
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

    for failure in failures:
        print("FAIL:", failure)
    print("PASS" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
