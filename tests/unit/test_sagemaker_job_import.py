"""Importing a SageMaker CreateInferenceRecommendationsJob request as an experiment file."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from recommender.errors import InputError, SpecError
from recommender.importers.sagemaker_job import import_job, read_job, write_experiment
from recommender.spec import ExperimentSpec, load_spec

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "sagemaker_job.json"


@pytest.fixture
def request_json() -> dict:
    return read_job(EXAMPLE)


def test_example_maps_phases_instance_and_threshold_and_validates(request_json: dict, tmp_path: Path) -> None:
    imported = import_job(request_json)
    path = write_experiment(imported, tmp_path / "bert.yaml")

    spec = load_spec(path)
    assert spec.name == "bert-base-load-test"
    assert [(t.instance_type, t.priced_as) for t in spec.all_targets] == [
        ("ml.g4dn.xlarge", "ml.g4dn.xlarge"),
        ("ml.c5.2xlarge", None),
    ]  # not in the catalog
    assert any("ml.c5.2xlarge is not in the price catalog" in note for note in imported.notes)
    assert (spec.max_parallel, spec.max_candidates, spec.time_budget_seconds) == (2, 10, 7200)
    assert (spec.traffic.stopping.max_invocations, spec.traffic.stopping.flat_invocations) == (3000, True)
    assert [(p.initial_users, p.spawn_rate, p.duration_seconds) for p in spec.traffic.phases] == [
        (1, 1, 120),
        (2, 6, 300),
    ]
    assert (spec.latency_threshold.percentile, spec.latency_threshold.ms) == ("p95", 100)
    written = yaml.safe_load(path.read_text())
    assert written.pop("notes")[1:] == imported.notes == spec.notes[1:]  # emitted as data, after the provenance line
    assert written == imported.experiment


def test_the_sample_payload_url_is_named_with_how_to_use_it(request_json: dict) -> None:
    url = "s3://bucket/payloads/queries.tar.gz"
    request_json["InputConfig"]["ContainerConfig"] = {"PayloadConfig": {"SamplePayloadUrl": url}}
    notes = import_job(request_json).notes
    assert any(f"the sample payload {url} is not fetched" in note and "payload.file" in note for note in notes), notes


@pytest.mark.parametrize(
    "expected",
    [
        "OMP_NUM_THREADS",
        "each instance type is a `local` target priced as that type (ml.g4dn.xlarge, ml.c5.2xlarge",
        "max_parallel 2 (MaxParallelOfTests)",
        "model-package/bert-base-embeddings/3",
        "RoleArn",
        "Tags are not copied",
    ],
)
def test_everything_not_mapped_is_noted(request_json: dict, expected: str) -> None:
    notes = import_job(request_json).notes
    assert any(expected in note for note in notes), notes


def test_stairs_map_to_the_stairs_shape(request_json: dict, tmp_path: Path) -> None:
    request_json["InputConfig"]["TrafficPattern"] = {
        "TrafficType": "STAIRS",
        "Stairs": {"DurationInSeconds": 180, "NumberOfSteps": 3, "UsersPerStep": 2},
    }
    imported = import_job(request_json)
    spec = load_spec(write_experiment(imported, tmp_path / "stairs.yaml"))
    stairs = spec.traffic.stairs
    assert (stairs.users_per_step, stairs.number_of_steps, stairs.duration_seconds) == (2, 3, 180)


def test_minimal_default_job_uses_experiment_defaults(tmp_path: Path) -> None:
    request = {
        "JobName": "quick",
        "JobType": "Default",
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "InputConfig": {"ModelName": "my-model"},
    }
    imported = import_job(request)
    spec = load_spec(write_experiment(imported, tmp_path / "quick.yaml"))
    assert spec.name == "quick" and spec.target.instance_type == "local-cpu"
    assert any("JobType Default" in note for note in imported.notes)
    assert any("SageMaker model my-model" in note for note in imported.notes)


def test_percentile_outside_the_spec_falls_back_to_p95(request_json: dict) -> None:
    request_json["StoppingConditions"]["ModelLatencyThresholds"] = [{"Percentile": "P999", "ValueInMilliseconds": 50}]
    imported = import_job(request_json)
    assert imported.experiment["latency_threshold"] == {"percentile": "p95", "ms": 50}
    assert any("P999" in note for note in imported.notes)


@pytest.mark.parametrize(
    ("mutate", "problem"),
    [
        (lambda r: r.pop("InputConfig"), 'Missing required parameter in input: "InputConfig"'),
        (lambda r: r["InputConfig"]["TrafficPattern"]["Phases"][0].update(SpawnRate="fast"), "SpawnRate"),
        (lambda r: r["InputConfig"].update(Traffic={}), 'Unknown parameter in InputConfig: "Traffic"'),
    ],
)
def test_malformed_requests_are_refused_with_problems(request_json: dict, mutate, problem: str) -> None:
    broken = copy.deepcopy(request_json)
    mutate(broken)
    with pytest.raises(SpecError) as caught:
        import_job(broken)
    assert any(problem in line for line in caught.value.problems), caught.value.problems


def test_read_job_reports_bad_json(tmp_path: Path) -> None:
    path = tmp_path / "job.json"
    path.write_text('{"JobName": ')
    with pytest.raises(SpecError, match="line 1"):
        read_job(path)


def test_example_is_a_valid_boto3_request(request_json: dict) -> None:
    """The shipped example passes botocore's own parameter validation for the operation."""
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(
        request_json, model.operation_model("CreateInferenceRecommendationsJob").input_shape
    )
    assert not report.has_errors(), report.generate_report()
    assert json.loads(EXAMPLE.read_text()) == request_json


def test_existing_endpoint_becomes_a_remote_target() -> None:
    request = {
        "JobName": "bench-existing",
        "JobType": "Advanced",
        "RoleArn": "arn:aws:iam::123456789012:role/R",
        "InputConfig": {"Endpoints": [{"EndpointName": "prod-bert"}]},
    }
    imported = import_job(request)
    assert imported.experiment["target"] == {"kind": "remote", "endpoint": "sagemaker://prod-bert"}
    ExperimentSpec.model_validate(imported.experiment)


ROLE = "arn:aws:iam::123456789012:role/RecommenderSageMakerRole"
DEFAULT_JOB = {  # the shape of the API reference's Default example: a model package and the instance types to try
    "JobName": "bert-default",
    "JobType": "Default",
    "RoleArn": ROLE,
    "InputConfig": {
        "ModelPackageVersionArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/bert/1",
        "JobDurationInSeconds": 3600,
        "EndpointConfigurations": [{"InstanceType": f"ml.g4dn.{s}"} for s in ("xlarge", "2xlarge", "12xlarge")],
    },
}
ADVANCED_JOB = {  # the Advanced (load test) shape: traffic, stopping conditions and resource limits
    "JobName": "bert-advanced",
    "JobType": "Advanced",
    "RoleArn": ROLE,
    "InputConfig": {
        "ModelPackageVersionArn": "arn:aws:sagemaker:us-east-1:123456789012:model-package/bert/1",
        "JobDurationInSeconds": 7200,
        "TrafficPattern": {
            "TrafficType": "STAIRS",
            "Stairs": {"DurationInSeconds": 120, "NumberOfSteps": 4, "UsersPerStep": 2},
        },
        "ResourceLimit": {"MaxNumberOfTests": 3, "MaxParallelOfTests": 3},
        "EndpointConfigurations": [{"InstanceType": "ml.g4dn.xlarge"}, {"InstanceType": "ml.g5.xlarge"}],
    },
    "StoppingConditions": {
        "MaxInvocations": 600,
        "FlatInvocations": "Continue",
        "ModelLatencyThresholds": [{"Percentile": "P99", "ValueInMilliseconds": 250}],
    },
}


@pytest.mark.parametrize("job", [DEFAULT_JOB, ADVANCED_JOB], ids=["default", "advanced"])
def test_realistic_jobs_round_trip_validate_and_plan_with_a_cost(job: dict, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from recommender.cli import build_app

    source = tmp_path / "job.json"
    source.write_text(json.dumps(job))
    tmp_path = tmp_path / "out"  # the output folder: it must be empty (outputs never land among other files)
    tmp_path.mkdir()
    runner = CliRunner()
    done = runner.invoke(build_app(), ["import", "sagemaker-job", str(source), "--out", str(tmp_path)])
    assert done.exit_code == 0, done.output
    spec = load_spec(tmp_path / f"{job['JobName']}.yaml")
    types = [c["InstanceType"] for c in job["InputConfig"]["EndpointConfigurations"]]
    assert [t.instance_type for t in spec.all_targets] == types and all(
        t.priced_as == t.instance_type for t in spec.all_targets
    )
    assert spec.time_budget_seconds == job["InputConfig"]["JobDurationInSeconds"]
    planned = runner.invoke(build_app(), ["plan", str(tmp_path / f"{job['JobName']}.yaml"), "--json"])
    estimate = json.loads(planned.stdout[: planned.stdout.rindex("}") + 1])
    assert estimate["estimated_usd"] > 0 and all(t["price_per_hour"] > 0 for t in estimate["targets"])
    assert [t["instance_type"] for t in estimate["targets"]] == types


def test_the_advanced_job_maps_stopping_limits_and_caps_the_grid_with_a_note() -> None:
    imported = import_job(copy.deepcopy(ADVANCED_JOB) | {})
    spec = ExperimentSpec.model_validate(imported.experiment)
    assert (spec.traffic.stopping.max_invocations, spec.traffic.stopping.flat_invocations) == (600, False)
    assert (spec.latency_threshold.percentile, spec.latency_threshold.ms) == ("p99", 250)
    assert (spec.max_parallel, spec.max_candidates) == (3, 3)
    assert (spec.traffic.stairs.users_per_step, spec.traffic.stairs.number_of_steps) == (2, 4)
    assert any("MaxNumberOfTests 3 caps the candidates" in note for note in imported.notes), imported.notes


def test_existing_endpoints_each_become_a_remote_target() -> None:
    request = {
        "JobName": "two",
        "JobType": "Advanced",
        "RoleArn": ROLE,
        "InputConfig": {"Endpoints": [{"EndpointName": "prod-a"}, {"EndpointName": "prod-b"}]},
    }
    spec = ExperimentSpec.model_validate(import_job(request).experiment)
    assert [(t.name, t.endpoint) for t in spec.all_targets] == [
        ("prod-a", "sagemaker://prod-a"),
        ("prod-b", "sagemaker://prod-b"),
    ]


@pytest.mark.parametrize("name", ["../escape", "a b", "x\nkind: sagemaker"])
def test_a_hostile_job_name_is_refused_before_it_names_a_file(name: str) -> None:
    with pytest.raises(InputError, match=r"JobName .* cannot name a file"):
        import_job(copy.deepcopy(DEFAULT_JOB) | {"JobName": name})


def test_text_from_the_job_never_changes_the_yaml_structure(tmp_path: Path) -> None:
    job = copy.deepcopy(DEFAULT_JOB)
    job["InputConfig"]["ModelName"] = "m\ntargets: []\n# injected"
    job["InputConfig"].pop("ModelPackageVersionArn")
    path = write_experiment(import_job(job), tmp_path / "safe.yaml")
    spec = load_spec(path)
    assert len(spec.all_targets) == 3 and any("targets: []" in note for note in spec.notes)


def test_an_output_folder_with_other_files_is_refused_without_force(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from recommender.cli import build_app
    from recommender.errors import UsageError

    source = tmp_path / "job.json"
    source.write_text(json.dumps(DEFAULT_JOB))
    out = tmp_path / "experiments"
    out.mkdir()
    (out / "mine.yaml").write_text("name: mine\n")
    runner = CliRunner()
    refused = runner.invoke(build_app(), ["import", "sagemaker-job", str(source), "--out", str(out)])
    assert isinstance(refused.exception, UsageError) and "is not empty" in refused.exception.message
    assert sorted(p.name for p in out.iterdir()) == ["mine.yaml"]  # nothing written
    forced = runner.invoke(build_app(), ["import", "sagemaker-job", str(source), "--out", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    assert (out / "mine.yaml").read_text() == "name: mine\n" and (out / f"{DEFAULT_JOB['JobName']}.yaml").exists()


def test_a_note_quoting_the_job_is_printed_as_text_not_markup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from recommender.cli import main

    request = json.loads(EXAMPLE.read_text())
    ranges = request["InputConfig"]["EndpointConfigurations"][0]["EnvironmentParameterRanges"]
    ranges["CategoricalParameterRanges"][0]["Name"] = "[/x]"  # a name a note quotes, Rich markup were it read so
    (tmp_path / "job.json").write_text(json.dumps(request))
    monkeypatch.setenv("COLUMNS", "500")
    with pytest.raises(SystemExit) as done:
        main(["import", "sagemaker-job", str(tmp_path / "job.json"), "--out", str(tmp_path / "out.yaml")])
    assert done.value.code in (0, None)
    assert "[/x]" in capsys.readouterr().out
