"""Property: whatever document `recommender validate FILE` is given, through the real entry point (main), the
outcome is success (exit 0) or a user error (exit 2), never another exit code nor an exception."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recommender.cli import main

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FEW = settings(SETTINGS, max_examples=20)  # each example walks up to a million values
FIELDS = (
    "name",
    "description",
    "notes",
    "model",
    "payload",
    "variants",
    "target",
    "traffic",
    "latency_threshold",
    "max_error_rate",
    "objectives",
    "capacity",
    "source",
    "path",
    "architecture",
    "optimizations",
    "dynamic_batching",
    "instance_counts",
    "max_batch_sizes",
    "kind",
    "instance_type",
    "phases",
    "ms",
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=20)
    | st.sampled_from(["pt", "onnx", "trt", "local", "sagemaker", "p95", "x", "model.onnx", "/", "../.."])
)
keys = st.sampled_from(FIELDS) | st.text(max_size=10) | st.integers()
structures = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(keys, children, max_size=4),
    max_leaves=30,
)
experiments = st.fixed_dictionaries(
    {"name": st.sampled_from(["x", "my-exp"]) | st.text(max_size=8)},
    optional={field: structures for field in FIELDS[1:]},
)


def validate(document: bytes) -> None:
    """`recommender validate` on a file holding `document`, in a folder of its own (a model.onnx beside it)."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "model.onnx").write_bytes(b"\x08\x07")
        path = Path(folder) / "experiment.yaml"
        path.write_bytes(document)
        with pytest.raises(SystemExit) as done:
            main(["validate", str(path)])
    assert done.value.code in (0, 2)


@SETTINGS
@given(st.binary(max_size=2000))
def test_random_bytes(document: bytes) -> None:
    validate(document)


@SETTINGS
@given(st.text(max_size=2000))
def test_random_text(document: str) -> None:
    validate(document.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(structures)
def test_random_yaml_structures(document) -> None:
    validate(yaml.safe_dump(document, allow_unicode=True).encode("utf-8", "surrogatepass"))


@SETTINGS
@given(experiments)
def test_experiment_shaped_documents(document: dict) -> None:
    validate(yaml.safe_dump(document, allow_unicode=True).encode("utf-8", "surrogatepass"))


@FEW
@given(st.integers(min_value=1, max_value=3000), st.sampled_from(["[", "{a: ", "- "]))
def test_deep_nesting(depth: int, opener: str) -> None:
    closer = {"[": "]", "{a: ": "}", "- ": ""}[opener]
    body = (
        opener * depth + "x" + closer * depth
        if opener != "- "
        else "".join(f"{' ' * (2 * i)}- \n" for i in range(depth)) + "x"
    )
    validate(f"name: deep\nvariants: {body}\n".encode())


@FEW
@given(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=12))
def test_alias_bombs(width: int, levels: int) -> None:
    lines = [f"l0: &l0 [{', '.join(['x'] * width)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    validate(("\n".join(lines) + "\nname: bomb\n").encode())
