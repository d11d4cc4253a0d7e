"""Target registry and tritonserver preparation, against fake wheel layouts (no server started)."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path

import pytest

from recommender.errors import TargetError
from recommender.targets import triton_binary
from recommender.targets.local import LocalTarget
from recommender.targets.registry import TARGETS, get_target
from recommender.targets.server_process import free_loopback_ports
from recommender.targets.triton_binary import STUB_NAME, TritonInstallation, python_version


@pytest.fixture
def fake_wheel(tmp_path: Path) -> TritonInstallation:
    """The nvidia-pytriton layout: server binary, Python backend, per-version stubs, vendored libs."""
    root = tmp_path / "site" / "pytriton" / "tritonserver"
    for path, text in {
        "bin/tritonserver": "#!/bin/sh\n",
        "backends/python/libtriton_python.so": "so",
        "backends/python/triton_python_backend_utils.py": "# utils",
        f"python_backend_stubs/{python_version()}/{STUB_NAME}": "stub",
        f"python_backend_stubs/3.8/{STUB_NAME}": "old stub",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    (root / "bin" / "tritonserver").chmod(0o755)
    return TritonInstallation(server_root=root, libs=tmp_path / "site" / "nvidia_pytriton.libs")


def test_registry_maps_local() -> None:
    assert TARGETS["local"] is LocalTarget
    assert isinstance(get_target("local", ready_timeout=5), LocalTarget)


@pytest.mark.parametrize(
    ("name", "hint"),
    [
        ("locl", "did you mean 'local'"),
        ("k8s", "known targets: docker, infinity, llamacpp, local, remote, sagemaker, vllm"),
    ],
)
def test_unknown_target(name: str, hint: str) -> None:
    with pytest.raises(TargetError, match="unknown target") as error:
        get_target(name)
    assert hint in error.value.hint


def test_bad_target_options() -> None:
    with pytest.raises(TargetError, match="invalid options"):
        get_target("local", port=1)


def test_locate_finds_installed_wheel() -> None:
    install = triton_binary.locate_triton()
    assert install.binary.name == "tritonserver" and install.libs.name == "nvidia_pytriton.libs"


def test_preflight_accepts_complete_layout(fake_wheel: TritonInstallation) -> None:
    assert triton_binary.preflight(fake_wheel) == fake_wheel


@pytest.mark.parametrize(
    ("remove", "message", "hint"),
    [
        ("bin/tritonserver", "tritonserver binary not found", "reinstall"),
        ("backends/python/libtriton_python.so", "Python backend not found", "reinstall"),
        (f"python_backend_stubs/{python_version()}/{STUB_NAME}", "no Python backend stub", "one of Python 3.8"),
    ],
)
def test_preflight_names_what_is_missing(fake_wheel: TritonInstallation, remove: str, message: str, hint: str) -> None:
    (fake_wheel.server_root / remove).unlink()
    with pytest.raises(TargetError, match=message) as error:
        triton_binary.preflight(fake_wheel)
    assert hint in error.value.hint


def test_backend_directory_is_per_run(fake_wheel: TritonInstallation, tmp_path: Path) -> None:
    backends = triton_binary.prepare_backend_directory(fake_wheel, tmp_path / "run")
    assert backends == tmp_path / "run" / "backends"
    python = backends / "python"
    assert sorted(p.name for p in python.iterdir()) == sorted(
        ["libtriton_python.so", "triton_python_backend_utils.py", STUB_NAME]
    )
    assert (python / STUB_NAME).read_text() == "stub" and os.access(python / STUB_NAME, os.X_OK)


def test_environment_puts_libpython_and_wheel_libs_first(fake_wheel: TritonInstallation) -> None:
    env = triton_binary.server_environment(
        fake_wheel, {"LD_LIBRARY_PATH": "/opt/lib", "PYTHONPATH": "/src", "HOME": "/h"}
    )
    assert env["LD_LIBRARY_PATH"].split(os.pathsep) == [
        sysconfig.get_config_var("LIBDIR"),
        str(fake_wheel.libs),
        "/opt/lib",
    ]
    assert env["PYTHONPATH"].split(os.pathsep)[0] == sysconfig.get_paths()["purelib"]
    assert env["PYTHONPATH"].endswith("/src") and env["HOME"] == "/h"


def test_the_stub_finds_this_interpreter_first_on_path(fake_wheel: TritonInstallation) -> None:
    """The stub's Python is the first `python3` on PATH: the running interpreter's folder leads the server's PATH
    (tests/integration/test_venv_off_path.py serves from a virtualenv that is not on PATH)."""
    env = triton_binary.server_environment(fake_wheel, {"PATH": "/elsewhere/venv/bin:/usr/bin"})
    assert env["PATH"].split(os.pathsep) == [str(Path(sys.executable).parent), "/elsewhere/venv/bin", "/usr/bin"]
    assert triton_binary.stub_interpreter().samefile(sys.executable)


def test_an_interpreter_whose_python3_is_another_is_refused(tmp_path: Path) -> None:
    """`python3.12` run by path where the folder's python3 is another Python: the stub would take its packages."""
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python3.12").symlink_to(sys.executable)
    (tmp_path / "bin" / "python3").symlink_to("/bin/sh")
    with pytest.raises(TargetError, match="is not the interpreter running recommender") as error:
        triton_binary.stub_interpreter(str(tmp_path / "bin" / "python3.12"))
    assert "-m venv .venv" in error.value.hint
    (tmp_path / "bin" / "python3").unlink()
    (tmp_path / "bin" / "python3").symlink_to("python3.12")  # a virtualenv's layout: bin/python3 is the interpreter
    assert triton_binary.stub_interpreter(str(tmp_path / "bin" / "python3.12")) == tmp_path / "bin" / "python3"


def test_free_loopback_ports_are_distinct() -> None:
    ports = free_loopback_ports(3)
    assert len(set(ports)) == 3 and all(1024 <= port < 65536 for port in ports)


def test_server_command_is_loopback_without_model_control_or_grpc_and_admin_apis_closed(tmp_path: Path) -> None:
    from recommender.targets.local import LocalDeployment

    deployment = LocalDeployment("bert", tmp_path / "repo", tmp_path / "run", (8100, 8101, 8102), instance="i1")
    command = deployment.command(Path("/x/tritonserver"), tmp_path / "run" / "backends", exit_timeout_secs=5)
    flags = dict(arg.removeprefix("--").split("=", 1) for arg in command[1:])
    assert {flags[f"{api}-address"] for api in ("http", "metrics")} == {"127.0.0.1"}
    assert (flags["http-port"], flags["metrics-port"], flags["allow-grpc"]) == ("8100", "8102", "false")
    assert flags["model-control-mode"] == "none" and "load-model" not in flags and "grpc-port" not in flags
    closed, value = flags["http-restricted-api"].split("=", 1)
    assert closed == "model-repository,shared-memory,trace,logging:x-recommender-closed"
    assert "\n" in value and "statistics" not in closed  # a value no HTTP header can carry; statistics stays open
    assert not any("token" in arg for arg in command)
    assert (deployment.endpoint, deployment.metrics_url) == ("http://127.0.0.1:8100", "http://127.0.0.1:8102/metrics")
