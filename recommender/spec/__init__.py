"""The experiment file: pydantic models (extra keys forbidden, every field described) and their loader.

One module per part of the file: model.py (model, payload), variants.py (the grid), target.py, traffic.py,
decision.py (latency threshold, objectives, capacity, correctness), experiment.py (the root), loader.py (YAML in,
validated spec or SpecError out). Import from here: `from recommender.spec import ExperimentSpec, load_spec`.
"""

from recommender.spec.base import MAX_GRID, NAME_PATTERN, Accelerator, Optimization, Precision, Strict
from recommender.spec.decision import CapacitySpec, CorrectnessSpec, ImportanceLevel, LatencyThreshold, Objectives
from recommender.spec.experiment import ExperimentSpec
from recommender.spec.loader import describe_errors, json_schema, load_spec
from recommender.spec.model import (
    DEFAULT_TEXTS,
    BertArchitecture,
    GenerationSpec,
    LlamaArchitecture,
    ModelSpec,
    PayloadSpec,
)
from recommender.spec.target import TargetKind, TargetSpec, target_label
from recommender.spec.traffic import (
    SHAPES,
    Concurrency,
    Phase,
    Rate,
    StabilityRule,
    Stairs,
    Stopping,
    Trace,
    TrafficSpec,
)
from recommender.spec.variants import DynamicBatching, DynamicBatchingChoice, VariantGrid

__all__ = [
    "DEFAULT_TEXTS",
    "MAX_GRID",
    "NAME_PATTERN",
    "SHAPES",
    "Accelerator",
    "BertArchitecture",
    "CapacitySpec",
    "Concurrency",
    "CorrectnessSpec",
    "DynamicBatching",
    "DynamicBatchingChoice",
    "ExperimentSpec",
    "GenerationSpec",
    "ImportanceLevel",
    "LatencyThreshold",
    "LlamaArchitecture",
    "ModelSpec",
    "Objectives",
    "Optimization",
    "PayloadSpec",
    "Phase",
    "Precision",
    "Rate",
    "StabilityRule",
    "Stairs",
    "Stopping",
    "Strict",
    "TargetKind",
    "TargetSpec",
    "Trace",
    "TrafficSpec",
    "VariantGrid",
    "describe_errors",
    "json_schema",
    "load_spec",
    "target_label",
]
