"""Candidate expansion and the stable resume key."""

import hashlib
import json

import pytest

from recommender.candidates import Candidate, expand_candidates, instance_group_count_of, target_index
from recommender.spec import DynamicBatching, ExperimentSpec


def spec(**variants) -> ExperimentSpec:
    return ExperimentSpec.model_validate({"name": "t", "variants": variants})


def test_grid_is_the_full_product_in_stable_order():
    candidates = expand_candidates(
        spec(
            optimizations=["pt", "onnx"],
            dynamic_batching=[False, True],
            instance_group_counts=[1, 2],
            max_batch_sizes=[4, 8],
        )
    )
    assert len(candidates) == 16
    assert [c.name for c in candidates[:4]] == [
        "pt-nodb-ig1-mbs4",
        "pt-nodb-ig1-mbs8",
        "pt-nodb-ig2-mbs4",
        "pt-nodb-ig2-mbs8",
    ]
    assert len({c.key for c in candidates}) == 16


def test_identical_configurations_are_expanded_once():
    candidates = expand_candidates(
        spec(dynamic_batching=[True, {"max_queue_delay_microseconds": 100}], instance_group_counts=[1, 1])
    )
    assert len(candidates) == 1


def test_preferred_batch_sizes_above_max_batch_size_are_dropped():
    (candidate,) = expand_candidates(spec(dynamic_batching=[{"preferred_batch_size": [2, 4, 16]}], max_batch_sizes=[4]))
    assert candidate.dynamic_batching.preferred_batch_size == [2, 4]


def test_key_is_stable_and_depends_on_every_setting():
    base = Candidate("pt", None, 1, 8, "local-cpu", "abc")
    assert base.key == Candidate("pt", None, 1, 8, "local-cpu", "abc").key
    # The canonical form is part of the stored data: changing it would silently re-measure every stored candidate.
    canonical = (
        '{"dynamic_batching":null,"instance_count":1,"instance_type":"local-cpu",'
        '"max_batch_size":8,"model_fingerprint":"abc","optimization":"pt"}'
    )
    assert base.key == hashlib.sha256(canonical.encode()).hexdigest()[:16]
    variants = [
        Candidate("onnx", None, 1, 8, "local-cpu", "abc"),
        Candidate("pt", DynamicBatching(), 1, 8, "local-cpu", "abc"),
        Candidate("pt", None, 2, 8, "local-cpu", "abc"),
        Candidate("pt", None, 1, 4, "local-cpu", "abc"),
        Candidate("pt", None, 1, 8, "ml.c5.xlarge", "abc"),
        Candidate("pt", None, 1, 8, "local-cpu", "other-model"),
    ]
    assert len({base.key, *(v.key for v in variants)}) == 7


@pytest.mark.parametrize(("db", "expected"), [(None, "pt-nodb-ig2-mbs8"), (DynamicBatching(), "pt-db-ig2-mbs8")])
def test_names_read_like_the_published_study(db, expected):
    assert Candidate("pt", db, 2, 8, "local-cpu").name == expected


def test_stored_keys_do_not_change():
    # Pinned values, computed on the code before `instance_count` was renamed to `instance_group_count`
    # (commit 378cdce). Candidates already stored are found again (resume, reuse) by this key: a refactor that
    # changes it would silently re-measure every stored candidate. Never update these values to make a test pass.
    batching = DynamicBatching(max_queue_delay_microseconds=500, preferred_batch_size=[4, 8])
    assert Candidate("pt", batching, 2, 8, "ml.g4dn.xlarge", "f00dfeed").key == "4eb4e7df522e70da"
    assert Candidate("onnx", None, 1, 4, "local", "").key == "2973708f5affb590"
    assert Candidate("pt", DynamicBatching(), 2, 8, "ml.c5.xlarge", "abc123").config()["instance_count"] == 2


def test_a_stored_configuration_rebuilds_the_same_candidate():
    candidate = Candidate("pt", DynamicBatching(preferred_batch_size=[4]), 2, 8, "local-cpu", "abc")
    stored = json.loads(json.dumps(candidate.config()))
    assert Candidate.from_config(stored) == candidate and Candidate.from_config(stored).key == candidate.key
    assert instance_group_count_of(stored) == 2


@pytest.mark.parametrize("axis", ["instance_group_counts", "instance_counts"])  # the former name still validates
def test_the_instance_group_axis_accepts_its_former_name(axis):
    assert [c.instance_group_count for c in expand_candidates(spec(**{axis: [1, 3]}))] == [1, 3, 1, 3]


ONE = {"optimizations": ["onnx"], "dynamic_batching": [False], "instance_group_counts": [1], "max_batch_sizes": [1]}
G4DN = [
    {"instance_type": f"ml.g4dn.{size}", "priced_as": f"ml.g4dn.{size}"} for size in ("xlarge", "2xlarge", "12xlarge")
]


def test_candidates_are_variants_times_targets_each_variant_on_every_target():
    multi = ExperimentSpec.model_validate(
        {"name": "t", "targets": G4DN, "variants": ONE | {"optimizations": ["pt", "onnx"]}}
    )
    candidates = expand_candidates(multi)
    assert [(c.optimization, c.instance_type) for c in candidates] == [
        (opt, f"ml.g4dn.{size}") for opt in ("pt", "onnx") for size in ("xlarge", "2xlarge", "12xlarge")
    ]
    assert [target_index(multi, c) for c in candidates] == [0, 1, 2, 0, 1, 2]
    assert candidates[0].name == "pt-nodb-ig1-mbs1@ml.g4dn.xlarge" and len({c.key for c in candidates}) == 6


def test_a_multi_target_key_names_its_target_and_a_single_target_key_stays_as_stored():
    two = ExperimentSpec.model_validate(
        {"name": "t", "targets": [{"name": "host-a"}, {"name": "host-b"}], "variants": ONE}
    )
    a, b = expand_candidates(two)  # same instance type (local-cpu), told apart by the target name
    assert (a.target, b.target) == ("host-a", "host-b") and a.key != b.key
    assert Candidate.from_config(json.loads(json.dumps(b.config()))) == b
    (single,) = expand_candidates(
        ExperimentSpec.model_validate({"name": "t", "targets": [{"instance_type": "local"}], "variants": ONE})
    )
    assert (
        "target" not in single.config()
        and single.key == Candidate("onnx", None, 1, 1, "local", single.model_fingerprint).key
    )
