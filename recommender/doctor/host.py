"""The host checks other than the engines: Python, the Triton server and its stub, the GPUs, Docker with the NVIDIA
runtime and the image's versions, the results database, AWS credentials. Each is the preflight the run calls (or the
same query), told as a Check; nothing here prints, and no secret is read out (a database password is redacted, AWS
credentials are only said to be present)."""

from __future__ import annotations

import platform
import sys

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from recommender.doctor.check import Check, checked
from recommender.errors import StoreError
from recommender.hardware import Hardware
from recommender.install import pip_install, requirement
from recommender.modelrepo.model_source import installed_version
from recommender.spec import TargetSpec
from recommender.store.database import explain, open_engine
from recommender.targets import llamacpp_venv, triton_binary, vllm, vllm_venv
from recommender.targets.docker import (
    DEFAULT_IMAGE,
    TENSORRT_LABEL,
    TRITON_LABEL,
    DockerTarget,
    ImageVersions,
    docker,
    image_versions,
)

MIN_PYTHON = (3, 11)
NVIDIA_RUNTIME_FIX = (
    "install the NVIDIA Container Toolkit, then `sudo nvidia-ctk runtime configure --runtime=docker && "
    "sudo systemctl restart docker`"
)
AWS_FIX = "configure them: `aws configure`, AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"


def python_check() -> Check:
    version = platform.python_version()
    found = f"Python {version} at {sys.executable}"
    if sys.version_info[:2] < MIN_PYTHON:
        return Check("Python", found, f"use Python {'.'.join(map(str, MIN_PYTHON))} or newer")
    return Check("Python", found)


def triton_check() -> Check:
    """The local target's server: the wheel's tritonserver, its Python backend, the stub for this Python, libpython
    and the interpreter the stub will take its packages from (triton_binary.preflight, as the run calls it)."""

    def describe() -> str:
        install = triton_binary.preflight()
        return (
            f"nvidia-pytriton {installed_version('nvidia-pytriton')}: {install.binary}; stub for Python "
            f"{triton_binary.python_version()}, its packages from {triton_binary.stub_interpreter()}"
        )

    return checked("Triton server (local target)", describe)


def vllm_check(target: TargetSpec, gpu: bool = False) -> Check:
    """A vllm target's virtualenv and its engine arguments (vllm.engine_flags, as the run's preflight checks them).
    A virtualenv not made yet does not fail the host: the first run makes it (a few minutes, once)."""
    name = "vLLM server (vllm target)"
    folder = vllm_venv.venv_dir(gpu)
    if not vllm_venv.installed(folder, gpu):
        made = f"{vllm_venv.ENVIRONMENT}={folder} python -m recommender.targets.vllm_venv"
        found = f"no vLLM virtualenv at {folder} yet"
        return Check(name, found, f"the first run makes it (minutes, about 3.4 GB), or now: {made}", needed=False)

    def describe() -> str:
        flags = vllm.setting_flags(target.engine_args, vllm.known_flags(folder / "bin" / "python"))
        return f"{vllm_venv.requirement(gpu)} in {folder}; engine flags: {' '.join(flags) or 'none given'}"

    return checked(name, describe)


def llamacpp_check(target: TargetSpec) -> Check:
    """A llamacpp target's virtualenv (llama-server built) and the candidates its settings make. A virtualenv not made
    yet does not fail the host: the first run builds it (about 10 minutes on 2 cores, once)."""
    name = "llama.cpp server (llamacpp target)"
    folder = llamacpp_venv.venv_dir()
    if not llamacpp_venv.installed(folder):
        made = f"{llamacpp_venv.ENVIRONMENT}={folder} python -m recommender.targets.llamacpp_venv"
        found = f"no llama.cpp virtualenv at {folder} yet"
        return Check(
            name, found, f"the first run builds it (about 10 minutes on 2 cores), or now: {made}", needed=False
        )

    def describe() -> str:
        server = llamacpp_venv.server_path(folder)
        return (
            f"{llamacpp_venv.REQUIREMENT}: {server}; {len(target.llamacpp.settings())} candidate(s) from its settings"
        )

    return checked(name, describe)


def gpu_check(hardware: Hardware) -> Check:
    """The GPUs NVML reports (name, memory, MIG, driver, CUDA driver version), or why there are none. A target asking
    for a GPU is refused by its own check (serving_hardware), as the run refuses it."""
    if not hardware.gpus:
        nvml = pip_install(requirement("nvidia-ml-py"))
        return Check("GPU", hardware.gpu_status, f"for GPU runs: an NVIDIA GPU with its driver, and {nvml}")
    gpus = ", ".join(
        f"GPU {gpu.index}: {gpu.name}, {gpu.memory_mb:.0f} MiB" + ("" if gpu.mig is None else f", MIG {_on(gpu.mig)}")
        for gpu in hardware.gpus
    )
    return Check("GPU", f"{gpus}; driver {hardware.driver_version}, CUDA driver version {hardware.cuda_version}")


def docker_check(image: str) -> Check:
    """The docker target's preflight: the CLI, an engine that answers, the image on this host."""

    def describe() -> str:
        DockerTarget(image=image, accelerator="cpu").preflight()
        version = docker("version", "--format", "{{.Server.Version}}", timeout=20).stdout.strip()
        return f"Docker engine {version}; image {image} present"

    return checked(f"Docker (image {image})", describe)


def nvidia_runtime_check() -> Check:
    """The NVIDIA runtime registered with Docker (what `--gpus` needs)."""
    runtimes = docker("info", "--format", "{{json .Runtimes}}", timeout=20)
    if runtimes.returncode == 0 and "nvidia" in runtimes.stdout:
        return Check("NVIDIA container runtime", "registered with Docker (docker info)")
    return Check("NVIDIA container runtime", "not registered with Docker (docker info)", NVIDIA_RUNTIME_FIX)


def image_versions_check(image: str) -> Check:
    """The Triton and TensorRT versions the image's labels say (containers/triton/Dockerfile writes them): a TensorRT
    engine built on this host loads only in a server with the same TensorRT version."""
    versions = image_versions(image)
    found = f"Triton {versions.triton or 'not labelled'}, TensorRT {versions.tensorrt or 'not labelled'}"
    if versions.triton and versions.tensorrt:
        return Check(f"image {image} versions", f"{found} (labels {TRITON_LABEL}, {TENSORRT_LABEL})", needed=False)
    fix = f"rebuild it from containers/triton, which labels its versions: docker build -t {image} containers/triton"
    return Check(f"image {image} versions", found, fix, needed=False)


def serving_image(target: TargetSpec) -> ImageVersions | None:
    """The versions of the image a target serves from on this host (the docker target's); None for the others (the
    sagemaker target's image is pulled by SageMaker, and no TensorRT engine is built here for it)."""
    return image_versions(target.image_uri or DEFAULT_IMAGE) if target.kind == "docker" else None


def database_check(url: str | None) -> Check:
    """The results database opens and answers (no migration, nothing written; the password redacted)."""

    def describe() -> str:
        engine = open_engine(url, migrate=False)
        try:
            with engine.connect() as connection:
                connection.execute(text("SELECT 1"))
        except SQLAlchemyError as error:
            reason, hint = explain(error)
            raise StoreError(f"cannot open {engine.url.render_as_string(hide_password=True)}: {reason}", hint) from None
        finally:
            engine.dispose()
        return f"{engine.url.render_as_string(hide_password=True)} opens"

    return checked("results database", describe)


def aws_check() -> Check:
    """AWS credentials for the sagemaker target, found the way boto3 finds them; only their source is said."""
    import boto3
    from botocore.exceptions import BotoCoreError

    try:
        credentials = boto3.Session().get_credentials()
    except BotoCoreError as error:  # AWS_PROFILE names a profile that does not exist, a malformed config file
        return Check("AWS credentials (sagemaker)", str(error), AWS_FIX)
    if credentials is None:
        return Check("AWS credentials (sagemaker)", "none found", AWS_FIX)
    return Check("AWS credentials (sagemaker)", f"present (from {credentials.method}; not shown)")


def _on(flag: bool) -> str:
    return "on" if flag else "off"
