"""A results database seeded through ResultStore's write API with fixed figures (report, rank and export tests).

Eight candidates of one study (pt/onnx x batching off/on x instance group 1/2, max batch 8), priced as
ml.g4dn.xlarge (0.7364 USD/hour), target 30,000 invocations per minute:

    pt-nodb-ig1    ok        300/min  p95  45 ms
    pt-nodb-ig2    ok        420/min  p95  60 ms
    pt-db-ig1      ok        480/min  p95  40 ms
    pt-db-ig2      ok        540/min  p95  38 ms   <- best on every objective
    onnx-nodb-ig1  ok        360/min  p95 520 ms   above the 500 ms threshold
    onnx-nodb-ig2  failed    (a reason with markup in it, to check escaping)
    onnx-db-ig1    ok        500/min  p95  90 ms   error rate 3 % above the 1 % limit
    onnx-db-ig2    pending   (never ran)
"""

from __future__ import annotations

from typing import Any

from recommender.candidates import Candidate, expand_candidates
from recommender.decide.prices import Catalog, InstancePrice
from recommender.metrics.headline import Headline
from recommender.metrics.payload_lengths import payload_lengths
from recommender.spec import ExperimentSpec
from recommender.store.results import ResultStore

FAILED_REASON = 'tritonserver exited: <script>alert("x")</script> & load failed'
DESCRIPTION = 'BERT-base <b>"study"</b> & friends'

SPEC: dict[str, Any] = {
    "name": "seed-study",
    "description": DESCRIPTION,
    # the length its snapshots were made at (the default payload pads to its longest request since variants.padding:
    # another workload, other keys)
    "payload": {"sequence_length": 128},
    "variants": {
        "optimizations": ["pt", "onnx"],
        "dynamic_batching": [False, {"max_queue_delay_microseconds": 2000, "preferred_batch_size": [4, 8]}],
        "instance_group_counts": [1, 2],
        "max_batch_sizes": [8],
    },
    "target": {"instance_type": "local-cpu", "priced_as": "ml.g4dn.xlarge", "region": "us-east-1"},
    "latency_threshold": {"percentile": "p95", "ms": 500},
    "max_error_rate": 0.01,
    "capacity": {"target_invocations_per_minute": 30000, "autoscaling_headroom": 0.5},
}

# name -> (status, reason, ipm, p95 ms, error rate); None = no run stored
# what every run was sent: 40 requests of 9 to 70 input tokens (mean 20), as metrics/payload_lengths reckons them
PAYLOAD = payload_lengths("0123456789abcdef", "queries.jsonl", [9] * 10 + [14] * 15 + [20] * 8 + [40] * 5 + [70] * 2)
FIGURES: dict[str, tuple[str, str | None, float, float, float] | None] = {
    "pt-nodb-ig1-mbs8": ("ok", None, 300.0, 45.0, 0.0),
    "pt-nodb-ig2-mbs8": ("ok", None, 420.0, 60.0, 0.0),
    "pt-db-ig1-mbs8": ("ok", None, 480.0, 40.0, 0.0),
    "pt-db-ig2-mbs8": ("ok", None, 540.0, 38.0, 0.0),
    "onnx-nodb-ig1-mbs8": ("ok", None, 360.0, 520.0, 0.0),
    "onnx-nodb-ig2-mbs8": ("failed", FAILED_REASON, 0.0, 0.0, 0.0),
    "onnx-db-ig1-mbs8": ("ok", None, 500.0, 90.0, 0.03),
    "onnx-db-ig2-mbs8": None,
}


def fixed_catalog() -> Catalog:
    """A fixed one-type catalog so report snapshots do not follow the packaged price list."""
    g4dn = InstancePrice(
        "ml.g4dn.xlarge", 0.7364, vcpus=4, memory_gib=16, gpus=1, gpu_memory_gib=16, accelerator="NVIDIA T4"
    )
    return Catalog(
        region="us-east-1", source="test catalog", retrieved="2026-01-01", instances={g4dn.instance_type: g4dn}
    )


def headline(ipm: float, p95: float, error_rate: float, threshold_ms: float = 500) -> Headline:
    """A headline as a single-repeat measurement without stability judgement would store it."""
    latency = {"p50": round(p95 * 0.6, 3), "p90": round(p95 * 0.9, 3), "p95": p95, "p99": round(p95 * 1.2, 3)}
    within = p95 <= threshold_ms and error_rate <= 0.01
    return Headline(
        phase_index=1,
        invocations_per_minute=ipm,
        latency_ms=latency,
        error_rate=error_rate,
        within_threshold=within,
        notes=() if within else ("over the limits",),
        requests=1000,
        failures=int(1000 * error_rate),
        percentile="p95",
    )


def seed_study(
    url: str, spec_document: dict[str, Any] | None = None, figures: dict[str, tuple | None] | None = None
) -> tuple[ResultStore, ExperimentSpec, list[Candidate]]:
    """Open the store at `url` and write the experiment, its candidates and their runs."""
    spec = ExperimentSpec.model_validate(spec_document or SPEC)
    figures = FIGURES if figures is None else figures
    store = ResultStore.open(url)
    experiment_id = store.save_experiment(spec, status="done")
    candidates = expand_candidates(spec)
    for candidate in candidates:
        candidate_id = store.save_candidate(experiment_id, candidate)
        figure = figures.get(candidate.name)
        if figure is None:
            continue
        status, reason, ipm, p95, error_rate = figure
        run_id = store.start_run(candidate_id, "protocol", None, payload=PAYLOAD.to_dict())
        line = headline(ipm, p95, error_rate, spec.latency_threshold.ms) if status == "ok" else None
        store.finish_run(run_id, status, reason=reason, headline=line)
    return store, spec, candidates
