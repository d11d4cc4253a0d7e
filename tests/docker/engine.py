"""A private Docker engine for the docker tier: Debian's dockerd as root, `--iptables=false --bridge=none` (nothing of
the host's network is changed; containers use the host network), with its socket, data root, exec root and pid file
in one scratch folder, so it never meets another engine on the host. Stopped (SIGTERM, then SIGKILL) and its folder
removed, its mounts first, on every exit path of the tier."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 30.0


def why_unavailable() -> str | None:
    """Why no engine can be started here (None: try)."""
    if os.geteuid() != 0:
        return "dockerd runs as root, and these tests do not"
    if shutil.which("dockerd") is None or shutil.which("docker") is None:
        return "dockerd or the docker CLI is not installed (bash scripts/install_system_packages.sh installs docker.io)"
    return None


@dataclass
class Engine:
    folder: Path  # short: the socket path must stay under 108 characters
    process: subprocess.Popen | None = None

    @property
    def host(self) -> str:
        """The DOCKER_HOST of this engine."""
        return f"unix://{self.folder / 'docker.sock'}"

    @property
    def log(self) -> Path:
        return self.folder / "dockerd.log"

    def start(self) -> str | None:
        """Start dockerd and wait until it answers; None, or why it did not start (its log's last line)."""
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    "dockerd",
                    "--iptables=false",
                    "--bridge=none",
                    f"--host={self.host}",
                    f"--data-root={self.folder / 'root'}",
                    f"--exec-root={self.folder / 'exec'}",
                    f"--pidfile={self.folder / 'dockerd.pid'}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return f"dockerd exited with code {self.process.returncode}: {self._last_log_line()}"
            if self.docker("version", "--format", "{{.Server.Version}}").returncode == 0:
                return None
            time.sleep(0.5)
        return f"dockerd did not answer within {START_TIMEOUT_S:.0f} s: {self._last_log_line()}"

    def docker(self, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "DOCKER_HOST": self.host}
        return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=timeout, env=env)

    def containers(self) -> list[str]:
        """Every container on the engine, running or not (`docker ps -a`): 'NAME STATE OWNER-LABEL' per line."""
        listed = self.docker("ps", "--all", "--format", '{{.Names}} {{.State}} {{.Label "recommender.owner"}}')
        assert listed.returncode == 0, listed.stderr
        return listed.stdout.splitlines()

    def stop(self) -> None:
        """Stop dockerd (it stops its containerd), unmount what it left mounted, remove the folder."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(STOP_TIMEOUT_S)
        for process in self.leftover_processes():  # its containerd and shims, should dockerd have left them
            process.kill()
        for mount in reversed(_mounts_under(self.folder)):
            subprocess.run(["umount", "--lazy", mount], capture_output=True, check=False)
        shutil.rmtree(self.folder, ignore_errors=True)

    def leftover_processes(self) -> list[psutil.Process]:
        """Processes whose command line names this engine's folder (dockerd, its containerd, the shims)."""
        found = []
        for process in psutil.process_iter(["cmdline"]):
            if any(str(self.folder) in part for part in process.info["cmdline"] or []):
                found.append(process)
        return found

    def _last_log_line(self) -> str:
        lines = self.log.read_text(errors="replace").strip().splitlines() if self.log.exists() else []
        return lines[-1] if lines else "no log"


def _mounts_under(folder: Path) -> list[str]:
    prefix = str(folder.resolve())
    with open("/proc/self/mounts") as mounts:
        return [line.split()[1] for line in mounts if line.split()[1].startswith(prefix)]
