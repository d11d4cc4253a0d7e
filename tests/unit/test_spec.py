"""Experiment-file validation: what users see when they get a field wrong."""

from pathlib import Path

import pytest

from recommender.errors import SpecError
from recommender.spec import ExperimentSpec, load_spec

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def problems_of(path: Path) -> list[str]:
    with pytest.raises(SpecError) as info:
        load_spec(path)
    return info.value.problems


def test_minimal_spec_gets_documented_defaults(tmp_path):
    spec = load_spec(write(tmp_path, "name: tiny\n"))
    assert spec.target.kind == "local" and spec.target.price_per_hour == 0.0
    assert spec.latency_threshold.percentile == "p95"
    assert spec.variants.dynamic_batching == [False, True]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "name: x\nvariants:\n  optimisations: [pt]\n",
            "variants.optimisations: unknown key (did you mean `optimizations`?)",
        ),
        (
            "name: x\ntraffic:\n  phases:\n    - {initial_users: 1, spwan_rate: 2}\n",
            "traffic.phases.0.spwan_rate: unknown key (did you mean `spawn_rate`?)",
        ),
        ("name: x\nlatency_treshold: {ms: 3}\n", "latency_treshold: unknown key (did you mean `latency_threshold`?)"),
        (
            "name: x\nvariants:\n  instance_counts: [0]\n",
            "variants.instance_counts.0: Input should be greater than or equal to 1",
        ),
        (
            "name: x\nvariants:\n  instance_group_counts: [0]\n",
            "variants.instance_group_counts.0: Input should be greater than or equal to 1",
        ),
        (
            "name: x\nlatency_threshold: {percentile: p97}\n",
            "latency_threshold.percentile: Input should be 'p50', 'p90', 'p95' or 'p99'",
        ),
    ],
)
def test_errors_name_file_field_and_fix(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert f"{path}: {expected}" in problems_of(path)


def test_unknown_key_far_from_any_lists_valid_keys(tmp_path):
    path = write(tmp_path, "name: x\ntarget:\n  zzzzzz: 1\n")
    (line,) = problems_of(path)
    keys = (
        "accelerator, api_key_env, batch_sizes, bucket, budget_usd, endpoint, endpoint_instance_count, endpoint_url, "
        "engine_args, engines, gpus, image_uri, instance_type, kind, kv_cache_gib, llamacpp, model, name, "
        "price_per_hour, priced_as, protocol, ready_timeout_seconds, region, role_arn, stream"
    )
    assert f"target.zzzzzz: unknown key (valid keys: {keys})" in line


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("name: x\nmodel: {source: bert}\n", "source bert needs `architecture`"),
        ("name: x\nmodel: {source: onnx}\n", "source onnx needs `path`"),
        ("name: x\nmodel: {source: bert, architecture: {hidden: 100, heads: 16}}\n", "must be a multiple of heads"),
    ],
)
def test_cross_field_rules(tmp_path, text, fragment):
    assert any(fragment in line for line in problems_of(write(tmp_path, text)))


def test_broken_yaml_names_the_line(tmp_path):
    path = write(tmp_path, "name: x\nvariants: [\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert str(path) in info.value.message and "line" in info.value.message


def test_missing_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecError, match="no such experiment file"):
        load_spec(tmp_path / "nope.yaml")


def test_relative_model_path_resolves_against_the_file(tmp_path):
    (tmp_path / "m.onnx").write_bytes(b"\x08\x07")  # ONNX opens with its ir_version field
    spec = load_spec(write(tmp_path, "name: x\nmodel: {source: onnx, path: m.onnx}\n"))
    assert spec.model.path == (tmp_path / "m.onnx").resolve()


@pytest.mark.parametrize(
    "name", ["quickstart.yaml", "bert.yaml", "g4dn-sizes.yaml", "search.yaml", "stacks.yaml", "llm.yaml"]
)
def test_shipped_experiments_validate(name):
    assert isinstance(load_spec(EXPERIMENTS / name), ExperimentSpec)


@pytest.mark.parametrize("path", sorted((EXPERIMENTS.parent / "benchmarks").glob("*.yaml")), ids=lambda p: p.name)
def test_the_benchmarks_experiment_files_validate(path):
    assert isinstance(load_spec(path), ExperimentSpec)


SAGEMAKER_TARGET = (
    "target: {kind: sagemaker, instance_type: ml.g5.xlarge, role_arn: 'arn:aws:iam::123456789012:role/R', "
    "bucket: b, image_uri: '123456789012.dkr.ecr.us-east-1.amazonaws.com/recommender-triton:24.10', budget_usd: 20}\n"
)


def test_sagemaker_target_fields(tmp_path):
    spec = load_spec(write(tmp_path, "name: x\n" + SAGEMAKER_TARGET))
    assert (spec.target.kind, spec.target.endpoint_instance_count, spec.target.budget_usd) == ("sagemaker", 1, 20)


@pytest.mark.parametrize("key", ["endpoint_instance_count", "instance_count"])  # the former name still validates
def test_endpoint_instance_count_accepts_its_former_name(tmp_path, key):
    spec = load_spec(
        write(tmp_path, "name: x\n" + SAGEMAKER_TARGET.replace("budget_usd: 20", f"budget_usd: 20, {key}: 3"))
    )
    assert spec.target.endpoint_instance_count == 3 and "endpoint_instance_count" in spec.model_dump()["target"]


@pytest.mark.parametrize(
    ("target", "fragment"),
    [
        ("{kind: sagemaker, instance_type: ml.g5.xlarge}", "target kind sagemaker needs role_arn, bucket, image_uri"),
        (
            "{kind: sagemaker, instance_type: local-cpu, role_arn: r, bucket: b, image_uri: i}",
            "not a SageMaker instance type",
        ),
        ("{kind: local, role_arn: r}", "role_arn not used by target kind local"),
        ("{kind: remote}", "target kind remote needs `endpoint`"),
        ("{kind: sagemaker, budget_usd: 0}", "budget_usd: Input should be greater than 0"),
        ("{kind: local, api_key_env: KEY}", "api_key_env not used by target kind local"),
        ("{kind: remote, url: 'http://h:8000', api_key_env: KEY}", "api_key_env is used by the openai protocols only"),
        (
            "{kind: remote, protocol: openai, url: 'http://h/v1', model: m, api_key_env: 'sk-123 456'}",
            "api_key_env: String should match pattern",  # a key pasted where its variable's name goes
        ),
    ],
)
def test_target_kind_checks(tmp_path, target, fragment):
    assert any(fragment in line for line in problems_of(write(tmp_path, f"name: x\ntarget: {target}\n")))


@pytest.mark.parametrize(
    ("stability", "tolerance"),
    [
        ({}, 0.05),
        ({"ipm_tolerance": 0.2, "latency_tolerance": 0.1}, 0.05),  # the former every-window rule: the smaller, halved
        ({"ipm_tolerance": 0.2, "tolerance": 0.03}, 0.03),  # the new key wins
    ],
)
def test_stability_keeps_accepting_the_former_tolerance_keys(stability, tolerance):
    spec = ExperimentSpec.model_validate({"name": "t", "traffic": {"stability": stability}})
    assert spec.traffic.stability.tolerance == tolerance and spec.traffic.stability.windows == 4


def test_targets_is_a_list_and_a_multi_target_spec_dumps_and_validates_again():
    multi = ExperimentSpec.model_validate({"name": "x", "targets": [{"instance_type": "a"}, {"instance_type": "b"}]})
    assert [t.instance_type for t in multi.all_targets] == ["a", "b"] and multi.target.instance_type == "a"
    dumped = multi.model_dump(mode="json")
    assert "target" not in dumped and ExperimentSpec.model_validate(dumped) == multi
    single = ExperimentSpec.model_validate({"name": "x"})
    assert "targets" not in single.model_dump() and single.all_targets == [single.target] and not single.multi_target


@pytest.mark.parametrize(
    "text, expected",
    [
        ("name: x\ntarget: {}\ntargets: [{}]\n", "give either `target:` (one) or `targets:` (a list), not both"),
        (
            "name: x\ntargets: [{instance_type: a}, {instance_type: a}]\n",
            "targets a appear more than once: give each a distinct `name`",
        ),
        ("name: x\ntargets: []\n", "targets"),
        ("name: x\nmax_parallel: 0\n", "max_parallel"),
    ],
)
def test_bad_targets_and_scheduling_fields_name_the_fix(tmp_path, text, expected):
    path = write(tmp_path, text)
    assert any(expected in line and str(path) in line for line in problems_of(path))


def test_a_bad_dynamic_batching_mapping_gets_its_own_error_not_the_bool_arms(tmp_path):
    path = write(
        tmp_path,
        "name: x\nsearch: adaptive\nvariants:\n  dynamic_batching: [false, {preferred_batch_size: {range: [0, 32]}}]\n",
    )
    problems = problems_of(path)
    assert problems == [
        f"{path}: variants.dynamic_batching.1: Value error, preferred_batch_size: range [0, 32] "
        "starts below 1; batch sizes start at 1, e.g. {range: [1, 32], log: true}"
    ]


def test_the_schema_states_the_interval_and_stability_rules_the_code_applies() -> None:
    """`recommender schema` is documentation: its figures are the code's (intervals, stability, racing)."""
    from recommender.metrics.intervals import MIN_REPEATS, t_quantile_95
    from recommender.spec.search import Racing
    from recommender.spec.traffic import StabilityRule, TrafficSpec

    repeats = TrafficSpec.model_fields["repeats"].description or ""
    assert f"{MIN_REPEATS} or more give 95 % intervals over the repeats" in repeats and "window-to-window" in repeats
    tolerance = StabilityRule.model_fields["tolerance"].description or ""
    default = StabilityRule().tolerance
    for windows in (4, 12):  # the half-width the default tolerance allows, t(n-1) x tolerance
        assert f"+-{t_quantile_95(windows - 1) * default * 100:.0f} % over {windows} windows" in tolerance
    assert "above each one's upper bound" in (Racing.model_fields["eta"].description or "")
