"""The measurement protocol: everything that shapes a measurement, hashed into the key that decides reuse.

    protocol_fingerprint(spec) -> 16 hex digits; a stored run is reused only under the same key (docs/design.md "Reuse")

In the key: the traffic (shapes (a trace by the sha256 of its file), warm-up, windows, repeats, stop conditions, the
number of windows they look at), the payload (texts, sequence length; a file's requests or synthetic prompts by their
fingerprint), the target's identity (kind, instance type, region, endpoint instance count, image, endpoint, GPUs), the
model (its spec and the sha256 of its file's bytes, or the packaged model's version) and the load client (its user class
and geventhttpclient's version), the hardware of a target serving on this host (CPU model and cores) and the software
versions (tritonserver from the nvidia-pytriton wheel, torch, onnxruntime, transformers, locust; plus openvino and
tensorrt (`tensorrt.__version__`, whichever wheel installed it) for an experiment whose grid has the `openvino` or `trt`
optimization, so that the keys of the other experiments stay as they were).
Not in the key: decisions (latency threshold, percentile, error limit, objectives, capacity, price, the stability
tolerance): changing them re-decides the stored windows, never re-measures. The latency and error stop conditions use
the threshold and error limit set at measure time: a run that stopped on them is reused under any limits, and under
looser ones its figures say where it stopped (metrics/levels.py `stop_note`; `run --fresh` measures further).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from recommender.hardware import Hardware
from recommender.load.payload import request_token_ids
from recommender.load.payload_source import payload_fingerprint
from recommender.load.prompts import prompts_fingerprint, prompts_for, synthesised
from recommender.load.runner import DEFAULT_CLIENT, HTTP_CLIENTS
from recommender.metrics.payload_lengths import PayloadLengths, payload_lengths
from recommender.modelrepo.model_source import installed_version, model_content
from recommender.modelrepo.tensorrt_engine import tensorrt_version
from recommender.spec import DEFAULT_TEXTS, ExperimentSpec, PayloadSpec, TargetSpec

# target fields that identify where and on what a candidate is measured (the rest: pricing, budget, credentials)
TARGET_IDENTITY = (
    "kind",
    "instance_type",
    "region",
    "endpoint_instance_count",
    "image_uri",
    "endpoint_url",
    "endpoint",
    "gpus",
)
# distributions whose versions shape a measurement: the server, the exporters, the load generator and its client
SOFTWARE = ("nvidia-pytriton", "torch", "onnxruntime", "transformers", "locust", "geventhttpclient")
# the engine of an optimization: its version shapes the measurement of an experiment that has the optimization
ENGINE_SOFTWARE = {"openvino": "openvino", "trt": "tensorrt"}
# versions read from the imported module, not a distribution: TensorRT is installed as tensorrt-cu12 / tensorrt-cu13
MODULE_VERSIONS = {"tensorrt": tensorrt_version}
DECISION_ONLY_STABILITY = ("tolerance", "ipm_tolerance", "latency_tolerance")


def protocol_fingerprint(
    spec: ExperimentSpec,
    versions: Mapping[str, str | None] | None = None,
    accelerator: str = "cpu",
    target: TargetSpec | None = None,
    host: Hardware | None = None,
) -> str:
    """Hash of how candidates on `target` (default: the spec's first) are measured; a stored run is reused only if this
    matches. `accelerator` is the resolved one (hardware.py): a GPU run never reuses a CPU run; "cpu" adds nothing, so
    keys stored before it stay valid. `host`: the hardware of a target that serves on this host (local, docker), by
    CPU model and cores, not only by its label. Each target of a multi-target experiment has its own key."""
    if versions is None:
        versions = software_versions(spec.variants.optimizations)
    document = protocol_document(spec, versions, target)
    if host is not None:
        document["host"] = {"cpu_model": host.cpu_model, "cpu_cores": host.cpu_cores}
    if accelerator != "cpu":
        document["accelerator"] = accelerator
    if spec.search.adaptive:  # a load search measures differently from the full plan (grid keys stay as they were)
        # probes try the highest level first since issue 24: a probe stored before measured bottom-up
        document["search"] = {
            "strategy": "adaptive",
            "knee_tolerance": spec.search.knee_tolerance,
            "probe": "capacity-first",
        }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def protocol_document(
    spec: ExperimentSpec, versions: Mapping[str, str | None], target: TargetSpec | None = None
) -> dict[str, Any]:
    """What the key is a hash of, as plain data."""
    traffic = spec.traffic.model_dump(mode="json")
    traffic["stability"] = {k: v for k, v in traffic["stability"].items() if k not in DECISION_ONLY_STABILITY}
    if spec.traffic.trace is not None:  # a trace by its content, not where it lies: an edited trace is measured again
        traffic["trace"]["file"] = hashlib.sha256(Path(spec.traffic.trace.file).read_bytes()).hexdigest()
    return {
        "traffic": traffic,
        "payload": prompts_document(spec) if synthesised(spec) else payload_document(spec.payload),
        "target": target_identity(target or spec.target),
        "model": {"spec": spec.model.model_dump(mode="json"), "content": model_content(spec.model)},
        "versions": dict(versions),
        "load_client": HTTP_CLIENTS[DEFAULT_CLIENT],  # the user class: the clients differ 2.3x per core
    }


def payload_document(payload: PayloadSpec) -> dict[str, Any]:
    """The payload as the key sees it: the texts, or a file's requests by their fingerprint (not the file's path: a
    moved file resumes; a changed one, or another sample, is measured again). Texts keep the key they always had."""
    if payload.file is None:
        return {"texts": payload.texts, "sequence_length": payload.sequence_length}
    return {"requests": payload_fingerprint(payload), "sequence_length": payload.sequence_length}


def prompts_document(spec: ExperimentSpec) -> dict[str, Any]:
    """Synthetic prompts as the key sees them: what is sent (their fingerprint), not the settings that made them, so
    another tokenizer or seed is measured again and a moved tokenizer folder is not."""
    return {"prompts": prompts_fingerprint(prompts_for(spec, Path(".")))}


def stored_sent(spec: ExperimentSpec) -> PayloadLengths:
    """What a run stores of what it sends: its synthetic prompts (their fingerprint, where they came from, their own
    input tokens) where the experiment makes them, else its payload's requests (`stored_payload`). Made here, before
    anything is stored, so that prompts the run cannot make are refused first."""
    if not synthesised(spec):
        return stored_payload(spec.payload)
    prompts = prompts_for(spec, Path("."))
    trace, generation = spec.traffic.trace, spec.payload.generation
    seed = generation.seed if generation is not None else 0
    source = f"synthetic prompts (seed {seed})"
    if trace is not None and trace.format == "mooncake":
        source = f"{Path(trace.file).name}: a mooncake trace's {len(prompts):,} rows (seed {seed})"
    lengths = [prompt.input_tokens for prompt in prompts]
    return payload_lengths(prompts_fingerprint(prompts), source, lengths)


def stored_payload(payload: PayloadSpec) -> PayloadLengths:
    """What a run stores of its payload: the fingerprint, where it came from and the requests' input tokens."""
    lengths = [len(row) for row in request_token_ids(payload)]
    return payload_lengths(payload_fingerprint(payload), payload_source(payload), lengths)


def payload_source(payload: PayloadSpec) -> str:
    """Where the requests came from, in words: 'queries.jsonl (a sample of 2,000, seed 0)', the texts."""
    if payload.file is None:
        return "the packaged sample texts" if tuple(payload.texts) == DEFAULT_TEXTS else "the experiment's texts"
    sample = f" (a sample of {payload.sample:,}, seed {payload.seed})" if payload.sample else ""
    return f"{payload.file.name}{sample}"


def target_identity(target: TargetSpec) -> dict[str, Any]:
    data = target.model_dump(mode="json")
    identity = {name: data[name] for name in TARGET_IDENTITY}
    if target.generative:  # what a generation is asked and how it is read; absent otherwise, so older keys stay valid
        identity |= {"protocol": target.protocol, "stream": target.stream, "model": target.model}
    return identity


def software_versions(optimizations: Iterable[str] = ()) -> dict[str, str | None]:
    """Installed versions of the distributions that shape a measurement (None when one is not installed), with the
    engines of `optimizations` (openvino, tensorrt) among them."""
    engines = sorted({ENGINE_SOFTWARE[o] for o in optimizations if o in ENGINE_SOFTWARE})
    return {name: _version(name) for name in (*SOFTWARE, *engines)}


def _version(name: str) -> str | None:
    reader = MODULE_VERSIONS.get(name)
    return reader() if reader is not None else installed_version(name)
