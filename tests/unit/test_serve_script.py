"""containers/triton/serve: SageMaker environment -> tritonserver arguments (no server started here)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.doctor.engines import RUNNER_MODULES
from recommender.targets.docker import TENSORRT_LABEL, TRITON_LABEL

SERVE = Path(__file__).resolve().parents[2] / "containers" / "triton" / "serve"
DOCKERFILE = SERVE.with_name("Dockerfile")


@pytest.fixture(scope="module")
def serve():
    loader = importlib.machinery.SourceFileLoader("serve_entrypoint", str(SERVE))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    (tmp_path / "bert" / "1").mkdir(parents=True)
    (tmp_path / "bert" / "config.pbtxt").write_text('name: "bert"\n')
    return tmp_path


def test_defaults_match_the_official_contract(serve, repository) -> None:
    args, env, warnings = serve.server_arguments({"SAGEMAKER_MODEL_REPOSITORY": str(repository)})
    assert args[0] == "/opt/tritonserver/bin/tritonserver"
    assert args[1:6] == [
        "--allow-sagemaker=true",
        "--allow-grpc=false",
        "--allow-http=false",
        "--allow-metrics=false",
        "--model-control-mode=explicit",
    ]
    assert f"--model-repository={repository}" in args and "--sagemaker-port=8080" in args
    assert "--log-verbose=true" in args and "--load-model=bert" in args
    assert "--backend-config=python,shm-default-byte-size=16777216" in args
    assert "--backend-config=python,shm-growth-byte-size=1048576" in args
    assert env["SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"] == "bert"  # the frontend routes /invocations by it
    assert warnings and "Starting with the only existing model directory bert" in warnings[0]


@pytest.mark.parametrize(
    ("variable", "value", "argument"),
    [
        ("SAGEMAKER_BIND_TO_PORT", "9090", "--sagemaker-port=9090"),
        ("SAGEMAKER_SAFE_PORT_RANGE", "20000-20999", "--sagemaker-safe-port-range=20000-20999"),
        ("SAGEMAKER_TRITON_THREAD_COUNT", "16", "--sagemaker-thread-count=16"),
        ("SAGEMAKER_TRITON_BUFFER_MANAGER_THREAD_COUNT", "4", "--buffer-manager-thread-count=4"),
        ("SAGEMAKER_TRITON_LOG_VERBOSE", "0", "--log-verbose=0"),
        ("SAGEMAKER_TRITON_LOG_INFO", "false", "--log-info=false"),
        ("SAGEMAKER_TRITON_LOG_WARNING", "true", "--log-warning=true"),
        ("SAGEMAKER_TRITON_LOG_ERROR", "true", "--log-error=true"),
        ("SAGEMAKER_TRITON_SHM_DEFAULT_BYTE_SIZE", "4096", "--backend-config=python,shm-default-byte-size=4096"),
        ("SAGEMAKER_TRITON_SHM_GROWTH_BYTE_SIZE", "2048", "--backend-config=python,shm-growth-byte-size=2048"),
        ("SAGEMAKER_TRITON_MODEL_NAMESPACING", "false", "--model-namespacing=false"),
        ("TRITON_BINARY", "/x/tritonserver", "/x/tritonserver"),
    ],
)
def test_each_variable_maps_to_its_argument(serve, repository, variable, value, argument) -> None:
    args, _, _ = serve.server_arguments({"SAGEMAKER_MODEL_REPOSITORY": str(repository), variable: value})
    assert argument in args


def test_additional_args_are_shell_split_and_appended_last(serve, repository) -> None:
    extra = "--backend-directory='/opt/my backends' --exit-timeout-secs=5"
    args, _, _ = serve.server_arguments(
        {"SAGEMAKER_MODEL_REPOSITORY": str(repository), "SAGEMAKER_TRITON_ADDITIONAL_ARGS": extra}
    )
    assert args[-2:] == ["--backend-directory=/opt/my backends", "--exit-timeout-secs=5"]


def test_named_model_is_loaded_without_warning(serve, repository) -> None:
    (repository / "other").mkdir()
    args, _, warnings = serve.server_arguments(
        {"SAGEMAKER_MODEL_REPOSITORY": str(repository), "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "other"}
    )
    assert "--load-model=other" in args and warnings == []


@pytest.mark.parametrize(
    ("layout", "env", "message"),
    [
        ("two", {}, "More than 1 model directory found"),
        ("empty", {}, "No model found"),
        ("flat", {}, "Incorrect directory structure"),
        (
            "one",
            {"SAGEMAKER_TRITON_DEFAULT_MODEL_NAME": "missing"},
            "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME missing does not exist",
        ),
    ],
)
def test_bad_repositories_fail_with_the_official_messages(serve, tmp_path, layout, env, message) -> None:
    if layout in ("one", "two"):
        (tmp_path / "a").mkdir()
    if layout == "two":
        (tmp_path / "b").mkdir()
    if layout == "flat":
        (tmp_path / "config.pbtxt").write_text("")
    with pytest.raises(serve.ServeError, match=message):
        serve.server_arguments({"SAGEMAKER_MODEL_REPOSITORY": str(tmp_path), **env})


def test_multi_model_mode_loads_nothing_itself(serve) -> None:
    args, _, warnings = serve.server_arguments({"SAGEMAKER_MULTI_MODEL": "true"})
    assert "--model-repository=/tmp/sagemaker" in args
    assert not any(arg.startswith("--load-model") for arg in args)
    assert warnings == ["Triton is running in SageMaker MME mode."]


def test_script_runs_as_a_program(repository) -> None:
    """Exit 1 with the message on a bad layout; SERVE_DRY_RUN prints the command (stdlib only, python3 in the image)."""
    done = subprocess.run(
        [sys.executable, str(SERVE)],
        env={"SAGEMAKER_MODEL_REPOSITORY": str(repository / "bert" / "1")},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 1 and "ERROR: No model found" in done.stderr
    done = subprocess.run(
        [sys.executable, str(SERVE)],
        env={"SAGEMAKER_MODEL_REPOSITORY": str(repository), "SERVE_DRY_RUN": "1"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and "--load-model=bert" in json.loads(done.stdout)


def test_dockerfile_pins_the_triton_image_and_installs_serve() -> None:
    text = DOCKERFILE.read_text()
    assert "ARG TRITON_VERSION=24.10-py3" in text
    assert "FROM nvcr.io/nvidia/tritonserver:${TRITON_VERSION}" in text
    assert "COPY serve /usr/bin/serve" in text and 'CMD ["serve"]' in text
    for package in ("torch==", "ONNXRUNTIME_PACKAGE"):
        assert package in text


def dockerfile_arguments(text: str) -> dict[str, str]:
    """The build arguments with their defaults (the last declaration with a default wins, as for docker build)."""
    return dict(re.findall(r"^ARG (\w+)=(\S+)$", text, flags=re.MULTILINE))


def test_the_image_installs_every_engine_the_python_backend_runner_imports() -> None:
    """A Python-backend export (the local target's measured repository) of any optimization serves from this image:
    each module the runner imports (doctor/engines.py RUNNER_MODULES) is pip-installed in it (issue 23 item 5)."""
    text = DOCKERFILE.read_text()
    arguments = dockerfile_arguments(text)
    pinned = re.findall(r'"([\w${}-]+)==\$\{(\w+)\}"', text)  # "package==${VERSION_ARGUMENT}"
    installed = {re.sub(r"\$\{(\w+)\}", lambda m: arguments[m.group(1)], package) for package, _ in pinned}
    packages = {"onnxruntime": "onnxruntime-gpu"}  # the module -> its package in the GPU image
    for module in sorted({m for modules in RUNNER_MODULES.values() for m in modules}):
        assert packages.get(module, module) in installed, module


def test_the_image_is_labelled_with_the_tensorrt_it_installs() -> None:
    """The label recommender compares with this host's TensorRT names the release the image's Python tensorrt is
    pinned to, both from the one build argument; the Triton label names the NGC release."""
    text = DOCKERFILE.read_text()
    assert f'{TENSORRT_LABEL}="${{TENSORRT_VERSION}}"' in text and f'{TRITON_LABEL}="${{TRITON_VERSION}}"' in text
    assert '"tensorrt==${TENSORRT_VERSION}"' in text
    assert dockerfile_arguments(text)["TENSORRT_VERSION"] == "10.5.0"  # NGC Triton 24.10's TensorRT
