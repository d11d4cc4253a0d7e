"""pt vs onnx vs openvino on MiniLM, side by side in one run, on this host's CPU (the engines alone, no server).

    python3 benchmarks/engines.py [--sequence-length 128] [--batches 1 8] [--threads 1] [--seconds 5]

Exports the packaged all-MiniLM-L6-v2 once per optimization (recommender's own exporter and cache), loads each artifact
with the runner the Python backend uses (templates/model.py), and times back-to-back calls for `--seconds` per batch
size. Prints median latency per call, sequences per second and the ratio to pt; checks every engine's output against
pt (max abs error). The table in docs/benchmarks.md comes from this script.
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import tempfile
import time
import types
from pathlib import Path

import numpy as np

from recommender.modelrepo.export import export_model
from recommender.spec import ModelSpec

ENGINES = ("pt", "onnx", "openvino")
TEMPLATE = Path(__file__).resolve().parents[1] / "recommender" / "modelrepo" / "templates" / "model.py"


def runners():
    """The Python-backend template's runner classes, loaded without Triton (its utils module is stubbed)."""
    sys.modules.setdefault("triton_python_backend_utils", types.ModuleType("triton_python_backend_utils"))
    spec = importlib.util.spec_from_file_location("runner_template", TEMPLATE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RUNNERS


def time_engine(runner, batch: int, sequence_length: int, seconds: float) -> tuple[float, np.ndarray]:
    ids = np.random.default_rng(0).integers(1000, 2000, (batch, sequence_length), dtype=np.int64)
    arrays = [ids, np.ones_like(ids)]
    output = runner(arrays, ["embedding"])[0]  # warm-up
    times, end = [], time.perf_counter() + seconds
    while time.perf_counter() < end:
        start = time.perf_counter()
        runner(arrays, ["embedding"])
        times.append(time.perf_counter() - start)
    return statistics.median(times), np.asarray(output)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    classes, cache = runners(), Path(tempfile.gettempdir()) / "recommender-engines-bench"
    loaded = {}
    for engine in ENGINES:
        artifact = export_model(ModelSpec(), engine, args.sequence_length, "engines-bench", cache)
        loaded[engine] = classes[artifact.format](str(artifact.path), args.threads, "cpu")
    print(f"MiniLM-L6, sequence length {args.sequence_length}, {args.threads} thread(s), {args.seconds:g} s per cell")
    print("| batch | engine | median ms per call | sequences/s | vs pt | max abs error vs pt |")
    print("|---|---|---|---|---|---|")
    for batch in args.batches:
        results = {engine: time_engine(loaded[engine], batch, args.sequence_length, args.seconds) for engine in ENGINES}
        base_ms, reference = results["pt"]
        for engine, (median_s, output) in results.items():
            error = float(np.abs(output - reference).max())
            print(
                f"| {batch} | {engine} | {median_s * 1e3:.2f} | {batch / median_s:.1f} | {base_ms / median_s:.2f}x "
                f"| {error:.1e} |"
            )


if __name__ == "__main__":
    main()
