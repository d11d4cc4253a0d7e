"""Locate the tritonserver binary shipped in the nvidia-pytriton wheel and prepare what it needs to run.

Nothing is written into site-packages: each run gets its own backend directory (the Python backend
plus the stub built for the running interpreter), and the environment points the stub at this
interpreter's libpython and site-packages.

The stub embeds Python without naming its interpreter, so Python finds its prefix (and a virtualenv's pyvenv.cfg,
hence its site-packages) from the first `python3` on PATH, whatever PYTHONPATH says. The server's PATH therefore
starts with the folder of the interpreter running recommender, whose `python3` must be that interpreter: a
virtualenv that is not on PATH (cron, systemd, `.venv/bin/recommender`) serves with its own packages.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from recommender.errors import TargetError

INSTALL_HINT = "pip install nvidia-pytriton==0.7.0 (Linux x86_64/aarch64, glibc >= 2.35)"
STUB_NAME = "triton_python_backend_stub"


@dataclass(frozen=True)
class TritonInstallation:
    """Where the wheel keeps the server, its Python backend, the per-Python-version stubs and its libraries."""

    server_root: Path  # .../pytriton/tritonserver
    libs: Path  # .../nvidia_pytriton.libs (the wheel's vendored shared libraries)

    @property
    def binary(self) -> Path:
        return self.server_root / "bin" / "tritonserver"

    @property
    def python_backend(self) -> Path:
        return self.server_root / "backends" / "python"

    @property
    def stub(self) -> Path:
        return self.server_root / "python_backend_stubs" / python_version() / STUB_NAME


def python_version() -> str:
    """The running interpreter as the wheel names its stub folders, e.g. '3.11'."""
    return f"{sys.version_info.major}.{sys.version_info.minor}"


def libpython_path() -> Path:
    """The shared libpython the stub must load (same version as this interpreter)."""
    libdir = sysconfig.get_config_var("LIBDIR") or ""
    soname = sysconfig.get_config_var("INSTSONAME") or f"libpython{python_version()}.so.1.0"
    return Path(libdir) / soname


def locate_triton() -> TritonInstallation:
    """Find the installed wheel through the import system; raise TargetError when it is not installed."""
    spec = importlib.util.find_spec("pytriton")
    locations = list(spec.submodule_search_locations or []) if spec else []
    if not locations:
        raise TargetError("nvidia-pytriton is not installed, so there is no tritonserver binary", hint=INSTALL_HINT)
    package = Path(locations[0])
    return TritonInstallation(server_root=package / "tritonserver", libs=package.parent / "nvidia_pytriton.libs")


def preflight(install: TritonInstallation | None = None) -> TritonInstallation:
    """Check that the server, the Python backend, the stub for this Python and libpython all exist."""
    install = install or locate_triton()
    if not os.access(install.binary, os.X_OK):
        raise TargetError(f"tritonserver binary not found at {install.binary}", hint=f"reinstall: {INSTALL_HINT}")
    if not (install.python_backend / "libtriton_python.so").is_file():
        raise TargetError(
            f"Triton Python backend not found in {install.python_backend}", hint=f"reinstall: {INSTALL_HINT}"
        )
    if not install.stub.is_file():
        stubs = install.stub.parent.parent
        shipped = sorted(p.name for p in stubs.iterdir() if (p / STUB_NAME).is_file()) if stubs.is_dir() else []
        raise TargetError(
            f"no Python backend stub for Python {python_version()} in the nvidia-pytriton wheel",
            hint=f"run recommender with one of Python {', '.join(shipped) or '(none shipped)'}",
        )
    stub_interpreter()
    if not libpython_path().is_file():
        raise TargetError(
            f"shared library {libpython_path()} not found; the backend stub needs a shared libpython",
            hint="use a Python built with --enable-shared "
            "(pyenv: PYTHON_CONFIGURE_OPTS=--enable-shared pyenv install ...)",
        )
    return install


def stub_interpreter(executable: str | None = None) -> Path:
    """The `python3` the backend stub will take its environment from: the one beside the running interpreter
    (`executable`, default sys.executable), which must be that interpreter; TargetError otherwise."""
    running = Path(executable or sys.executable)
    beside = running.parent / "python3"
    if not (beside.is_file() and beside.samefile(running)):
        raise TargetError(
            f"the Python backend stub takes its packages from `python3` on PATH, and {beside} is not "
            f"the interpreter running recommender ({running})",
            hint=f"run recommender from a virtualenv (`{running} -m venv .venv`, then `.venv/bin/recommender`), whose "
            "bin/python3 is its interpreter",
        )
    return beside


def prepare_backend_directory(install: TritonInstallation, run_dir: Path) -> Path:
    """Copy the Python backend and this interpreter's stub into <run_dir>/backends; returns that folder."""
    backends = Path(run_dir) / "backends"
    target = backends / "python"
    target.mkdir(parents=True, exist_ok=True)
    for item in install.python_backend.iterdir():
        if item.is_file():
            shutil.copy2(item, target / item.name)
    shutil.copy2(install.stub, target / STUB_NAME)
    (target / STUB_NAME).chmod(0o755)
    return backends


def server_environment(install: TritonInstallation, base: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment: this libpython and the wheel's libraries first, this site-packages on the path, and
    this interpreter's folder first on PATH (the stub's Python is the `python3` found there: see the module's doc)."""
    env = dict(os.environ if base is None else base)
    env["PATH"] = _join_paths([str(Path(sys.executable).parent)], env.get("PATH"))
    libraries = [str(libpython_path().parent), str(install.libs)]
    env["LD_LIBRARY_PATH"] = _join_paths(libraries, env.get("LD_LIBRARY_PATH"))
    paths = sysconfig.get_paths()
    site_packages = list(dict.fromkeys([paths["purelib"], paths["platlib"]]))
    env["PYTHONPATH"] = _join_paths(site_packages, env.get("PYTHONPATH"))
    return env


def _join_paths(first: list[str], existing: str | None) -> str:
    parts = [*first, *(existing.split(os.pathsep) if existing else [])]
    return os.pathsep.join(dict.fromkeys(part for part in parts if part))


def server_command(
    binary: Path,
    repository: Path,
    backend_directory: Path,
    *,
    address: str,
    http_port: int,
    metrics_port: int,
    model_control: str = "none",
    restricted_api: str | None = None,
    shm_prefix: str | None = None,
    exit_timeout_secs: int | None = None,
) -> list[str]:
    """A tritonserver command line: HTTP and metrics on `address`, gRPC off; `model_control` "none" (the model loaded
    at start, nothing loads or unloads one) or "explicit" (the model-repository API loads them: benchmarks only);
    `restricted_api` as --http-restricted-api takes it; `shm_prefix` names the Python backend's /dev/shm regions
    (so the ones a killed stub leaves can be found)."""
    command = [
        str(binary),
        f"--model-repository={repository}",
        f"--backend-directory={backend_directory}",
        f"--model-control-mode={model_control}",
        f"--http-address={address}",
        f"--http-port={http_port}",
        "--allow-grpc=false",
        f"--metrics-address={address}",
        f"--metrics-port={metrics_port}",
    ]
    if restricted_api is not None:
        command.append(f"--http-restricted-api={restricted_api}")
    if shm_prefix is not None:
        command.append(f"--backend-config=python,shm-region-prefix-name={shm_prefix}")
    if exit_timeout_secs is not None:
        command.append(f"--exit-timeout-secs={exit_timeout_secs}")
    return command
