"""The `docker` target: the containers/triton image on this host's Docker engine, serving Triton's native backends.

GPUs: each container gets exactly its candidate's GPUs, by UUID (`--gpus "device=GPU-...,..."`, with
CUDA_DEVICE_ORDER=PCI_BUS_ID), so they are its CUDA devices 0..n-1 in PCI order, the indices its config lists; a
CPU candidate's container gets none. Which host GPUs a target may use is its `gpus` option, read as the docker CLI
reads it (`hardware.docker_gpus`; null: CPU only).

Network: the container shares the host's network (`--network host`: it works on an engine without a bridge, such as
`dockerd --bridge=none`, and costs no NAT hop on the measured path), and tritonserver binds HTTP and metrics to
127.0.0.1 on ports chosen here (`server_process.free_loopback_ports`), as the local target's server does: gRPC off,
no model-repository API (`--model-control-mode=none`), the admin APIs closed (local.py says how).

The model repository is copied (symlinks dereferenced) into the run directory and mounted read-only at
/opt/ml/model. Every container carries the labels recommender.run-id=RUN (what `recommender cleanup` finds) and
recommender.owner=HOST:PID:START (the job that started it): a job killed with -9 cannot remove its containers, so
every deploy first removes those whose owner on this host is gone, and never one of a job still running. A failed
`docker run` removes its container; the docker CLI runs in its own session, so a Ctrl-C at the terminal reaches the
job (which removes the container) and never cuts a `docker` command short.

The image says its Triton and TensorRT versions in the labels containers/triton/Dockerfile writes
(`image_versions`): a TensorRT engine built on this host loads only in a server with the same TensorRT version. An
image labelled org.recommender.backends=python (containers/triton-cpu: the wheel's tritonserver, no native backend)
is given the Python-backend runner's repositories, as the local target is.
"""

from __future__ import annotations

import json
import secrets
import shutil
import socket
import subprocess
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar

import psutil

from recommender.errors import TargetError
from recommender.hardware import Gpu, cuda_environment, detect_hardware, resolve_accelerator, usable_hardware
from recommender.targets.base import built
from recommender.targets.deployment import Deployment
from recommender.targets.leftovers import process_is_gone
from recommender.targets.local import CLOSED_APIS, CLOSED_HEADER, CLOSED_VALUE
from recommender.targets.server_process import LOOPBACK, descendants, free_loopback_ports
from recommender.targets.triton_binary import server_command

DEFAULT_IMAGE = "recommender-triton:24.10"
CONTAINER_REPOSITORY = "/opt/ml/model"
CONTAINER_BACKENDS = "/opt/tritonserver/backends"  # the NGC image's, and containers/triton-cpu's
RUN_LABEL = "recommender.run-id"
OWNER_LABEL = "recommender.owner"  # HOST:PID:START of the job that started the container
TRITON_LABEL = "org.recommender.triton"  # the image's versions, as containers/triton/Dockerfile labels them
TENSORRT_LABEL = "org.recommender.tensorrt"
BACKENDS_LABEL = "org.recommender.backends"  # "python": the Python backend only (containers/triton-cpu)
ENGINE_HINT = (
    "Start Docker (or point DOCKER_HOST at a running engine) on a host with the NVIDIA Container Toolkit, "
    "or use target kind `local` (no Docker needed). See containers/README.md."
)


def docker(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    """Run the docker CLI, in its own session (a Ctrl-C at the terminal is the job's to handle: it must not stop a
    `docker run` or `docker rm` half-way); TargetError when it is not installed."""
    executable = shutil.which("docker")
    if executable is None:
        raise TargetError("the docker command is not installed on this host", hint=ENGINE_HINT)
    return subprocess.run(
        [executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


@dataclass(frozen=True)
class ImageVersions:
    """The Triton and TensorRT versions an image's labels say (None: not labelled, or the image is not here), and the
    backends it says it serves (None: not said, Triton's native backends as the NGC image has them)."""

    image: str
    triton: str | None
    tensorrt: str | None
    backends: str | None = None

    @property
    def native(self) -> bool:
        """Whether the image serves Triton's native backends (else only the Python backend's runner)."""
        return self.backends != "python"


def image_versions(image: str) -> ImageVersions:
    """The versions `image` is labelled with, read with `docker image inspect`."""
    inspected = docker("image", "inspect", "--format", "{{json .Config.Labels}}", image, timeout=20)
    try:
        labels = json.loads(inspected.stdout) if inspected.returncode == 0 else None
    except ValueError:
        labels = None
    labels = labels if isinstance(labels, dict) else {}
    return ImageVersions(
        image,
        labels.get(TRITON_LABEL) or None,
        labels.get(TENSORRT_LABEL) or None,
        labels.get(BACKENDS_LABEL) or None,
    )


def owner_label() -> str:
    """This job as a container's owner: host, pid and the process's start time (a reused pid is another owner)."""
    process = psutil.Process()
    return f"{socket.gethostname()}:{process.pid}:{process.create_time():.3f}"


@dataclass
class DockerDeployment(Deployment):
    """A running container serving one model; leaving `with` removes it."""

    container: str
    model_name: str
    endpoint: str
    log_path: Path
    gpu_uuids: tuple[str, ...] = ()  # the GPUs the container is given
    metrics_url: str | None = None

    def _check_running(self) -> None:
        if docker("inspect", "--format", "{{.State.Running}}", self.container).stdout.strip() != "true":
            raise TargetError(
                f"container {self.container} exited before {self.model_name!r} was ready", hint=self.failure_hint()
            )

    def server_pids(self) -> list[int]:
        """The container's tritonserver and its backend stubs, as this host sees them (the engine runs here, and a
        container's processes are host processes; an engine elsewhere has none here): what the server's CPU figures
        sample, what the isolation pins to the server's cores and what `watched` finds dead after a crash. [] when it
        is not running."""
        inspected = docker("inspect", "--format", "{{.State.Pid}}", self.container)
        pid = int(inspected.stdout.strip()) if inspected.stdout.strip().isdigit() else 0
        try:
            if pid <= 0 or psutil.Process(pid).name() != "tritonserver":  # another host's engine (DOCKER_HOST): none
                return []
        except psutil.Error:
            return []
        return [pid, *(process.pid for process in descendants(pid))]

    def _stop(self) -> None:
        """Save the container log next to the run, then remove the container."""
        logs = docker("logs", self.container)
        if logs.returncode == 0:
            self.log_path.write_text(logs.stdout + logs.stderr)
        removed = docker("rm", "--force", self.container)
        if removed.returncode != 0 and "No such container" not in removed.stderr:
            raise TargetError(
                f"could not remove container {self.container}: {removed.stderr.strip()}",
                hint=f"docker rm -f {self.container}",
            )


@dataclass(frozen=True)
class DockerTarget:
    """Deploys model repositories as containers of the recommender Triton image."""

    kind: ClassVar[str] = "docker"  # the spec's target.kind (usable_hardware reads it)

    name: ClassVar[str] = "docker"
    load_shares_host: ClassVar[bool] = True  # recommender drives the load from the Docker host itself
    deploys: ClassVar[bool] = True
    image: str = DEFAULT_IMAGE
    gpus: str | None = "all"  # the host GPUs candidates may use, as `docker run --gpus` reads it; None: CPU only
    ready_timeout: float = 300.0
    accelerator: str = "auto"  # auto | cpu | gpu: gpu is refused at preflight on a host without one
    run_id: str = "adhoc"  # the label recommender.run-id of every container of this run

    @classmethod
    def from_spec(cls, target: Any, experiment: str, run_id: str) -> DockerTarget:
        return cls(
            image=target.image_uri or DEFAULT_IMAGE,
            gpus=target.gpus,
            ready_timeout=target.ready_timeout_seconds,
            accelerator=target.accelerator,
            run_id=run_id,
        )

    @cached_property
    def native_backends(self) -> bool:
        """Whether the image serves Triton's native backends (pytorch_libtorch, onnxruntime_onnx, tensorrt_plan,
        openvino: the NGC image), read from its labels after the preflight found it; else the Python-backend runner."""
        return image_versions(self.image).native

    def cancel_on(self, event: threading.Event) -> None:  # Target protocol: deploy returns at once or times out
        return None

    def preflight(self) -> None:
        """The host has the accelerator asked for (among the GPUs `gpus` gives), the docker CLI exists, its engine
        answers, the image is present."""
        resolve_accelerator(self.accelerator, usable_hardware(self, detect_hardware()))
        try:
            info = docker("version", "--format", "{{.Server.Version}}", timeout=20)
        except subprocess.TimeoutExpired:
            raise TargetError("the Docker engine did not answer within 20 s", hint=ENGINE_HINT) from None
        if info.returncode != 0 or not info.stdout.strip():
            detail = (info.stderr.strip().splitlines() or ["no server version reported"])[-1]
            raise TargetError(f"no Docker engine is reachable from this host ({detail})", hint=ENGINE_HINT)
        if docker("image", "inspect", self.image).returncode != 0:
            raise TargetError(
                f"image {self.image} is not on this host",
                hint=f"docker build -t {self.image} containers/triton (or docker pull it)",
            )

    def deploy(
        self,
        repository: Path | None,
        model_name: str,
        run_dir: Path,
        gpus: tuple[Gpu, ...] = (),
        config: Mapping[str, Any] | None = None,
    ) -> DockerDeployment:
        remove_containers(abandoned_containers())  # of a job killed with -9: it could not remove them itself
        run_dir = Path(run_dir).resolve()
        mounted = run_dir / "docker-repository"
        shutil.rmtree(mounted, ignore_errors=True)
        shutil.copytree(built(repository), mounted, symlinks=False)
        container = f"recommender-{secrets.token_hex(4)}"
        http, metrics = free_loopback_ports(2)
        deployment = DockerDeployment(
            container,
            model_name,
            f"http://{LOOPBACK}:{http}",
            run_dir / "server.log",
            tuple(g.uuid for g in gpus),
            f"http://{LOOPBACK}:{metrics}/metrics",
        )
        with deployment.starting():  # a failed `docker run` may have created the container: teardown removes it
            started = docker(*self.run_arguments(container, mounted, (http, metrics), gpus))
            if started.returncode != 0:
                raise TargetError(f"docker run failed: {started.stderr.strip()}", hint=ENGINE_HINT)
            deployment.wait_until_ready(self.ready_timeout, poll_s=1.0)
        return deployment

    def run_arguments(
        self, container: str, repository: Path, ports: tuple[int, int], gpus: tuple[Gpu, ...] = ()
    ) -> list[str]:
        """`docker run` arguments: labelled with the run and this job, on the host's network with HTTP and metrics on
        loopback `ports` only, no gRPC, no model control API; exactly `gpus`, by UUID, as the container's CUDA devices
        0..n-1 (none: no `--gpus`)."""
        environment = [arg for key, value in cuda_environment(gpus).items() for arg in ("--env", f"{key}={value}")]
        devices = ["--gpus", f'"device={",".join(gpu.uuid for gpu in gpus)}"', *environment] if gpus else []
        http, metrics = ports
        command = server_command(
            Path("tritonserver"),
            Path(CONTAINER_REPOSITORY),
            Path(CONTAINER_BACKENDS),
            address=LOOPBACK,
            http_port=http,
            metrics_port=metrics,
            restricted_api=f"{CLOSED_APIS}:{CLOSED_HEADER}={CLOSED_VALUE}",
        )
        return [
            "run",
            "--detach",
            "--name",
            container,
            "--label",
            f"{RUN_LABEL}={self.run_id}",
            "--label",
            f"{OWNER_LABEL}={owner_label()}",
            *devices,
            "--network",
            "host",
            "--shm-size=1g",
            "--volume",
            f"{repository}:{CONTAINER_REPOSITORY}:ro",
            self.image,
            *command,
        ]


def abandoned_containers() -> list[str]:
    """The containers whose owner (label recommender.owner) is a job on this host that is gone: killed with -9, it
    could not remove them. A running job's containers, and other hosts' (sharing the engine), are never among them;
    TargetError when the engine cannot list them."""
    label_format = f'{{{{.Names}}}}\t{{{{.Label "{OWNER_LABEL}"}}}}'
    listed = docker("ps", "--all", "--filter", f"label={OWNER_LABEL}", "--format", label_format)
    if listed.returncode != 0:
        raise TargetError(f"docker ps failed: {listed.stderr.strip()}", hint=ENGINE_HINT)
    here = socket.gethostname()
    abandoned = []
    for line in listed.stdout.splitlines():
        name, _, owner = line.partition("\t")
        fields = owner.rsplit(":", 2)
        if len(fields) != 3 or fields[0] != here:
            continue  # another host's job: its process cannot be looked at from here
        try:
            pid, started = int(fields[1]), float(fields[2])
        except ValueError:
            continue  # not a label this code wrote: not ours to judge
        if process_is_gone(pid, started):
            abandoned.append(name)
    return abandoned


def labelled_containers(run_id: str | None = None, older_than: timedelta | None = None) -> list[str]:
    """The containers labelled recommender.run-id (that run's only, when given; only those created longer than
    `older_than` ago, when given); TargetError when the engine cannot list them."""
    label = f"label={RUN_LABEL}" + (f"={run_id}" if run_id else "")
    listed = docker("ps", "--all", "--filter", label, "--format", "{{.Names}}\t{{.CreatedAt}}")
    if listed.returncode != 0:
        raise TargetError(f"docker ps failed: {listed.stderr.strip()}", hint=ENGINE_HINT)
    now = datetime.now(UTC)
    names = [
        name
        for name, created in (line.split("\t", 1) for line in listed.stdout.splitlines() if "\t" in line)
        if older_than is None or now - _created(created) > older_than
    ]
    return names


def remove_containers(names: list[str]) -> None:
    """`docker rm --force` the named containers; TargetError naming them when that fails."""
    if not names:
        return
    removed = docker("rm", "--force", *names)
    if removed.returncode != 0:
        raise TargetError(
            f"could not remove containers {names}: {removed.stderr.strip()}", hint=f"docker rm -f {' '.join(names)}"
        )


def _created(text: str) -> datetime:
    """docker's CreatedAt, e.g. '2025-01-02 03:04:05 +0000 UTC'."""
    try:
        return datetime.strptime(" ".join(text.split()[:3]), "%Y-%m-%d %H:%M:%S %z")
    except ValueError as error:
        raise TargetError(f"docker ps gave an unreadable creation time {text!r}") from error
