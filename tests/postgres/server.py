"""A throwaway PostgreSQL server for the postgres tier: Debian's `postgresql` binaries (initdb, pg_ctl), a data
directory in a temp dir owned by an unprivileged user, loopback TCP on a free port, its unix socket in the temp dir,
password authentication (scram-sha-256) as in infra/compose.yaml. Stopped with `pg_ctl stop -m fast`.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

INSTALL = "bash scripts/install_system_packages.sh (installs Debian's postgresql: apt-get install postgresql)"
USER, PASSWORD = "recommender", "tier-secret"  # the database role, as infra/compose.yaml names it
SERVICE_ACCOUNT = "postgres"  # the unprivileged OS user the server runs as when the tests run as root


def find_binaries() -> Path | None:
    """The folder holding initdb and pg_ctl: Debian's /usr/lib/postgresql/<newest>/bin, else the PATH."""
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True)
    found = shutil.which("initdb")
    for folder in [*versions, *([str(Path(found).parent)] if found else [])]:
        if all(os.access(Path(folder) / name, os.X_OK) for name in ("initdb", "pg_ctl")):
            return Path(folder)
    return None


@dataclass
class PostgresServer:
    """One server process; `start` and `stop` are idempotent enough for a fixture's finally block."""

    binaries: Path
    root: Path  # temp dir: data/, the socket, the log, the password file
    port: int = 0
    address: str = "127.0.0.1"  # where it listens (the multihost tier: its host's address)
    inside: Callable[[list[str]], list[str]] = list  # how a command runs where the server runs (a namespace)

    @classmethod
    def create(cls, binaries: Path, address: str = "127.0.0.1", inside=list, port: int = 0) -> PostgresServer:
        root = Path(tempfile.mkdtemp(prefix="recommender-pg-"))  # in /tmp: reachable by the service account
        return cls(binaries, root, port, address, inside)

    @property
    def data(self) -> Path:
        return self.root / "data"

    def start(self) -> None:
        owner = _service_account()
        (self.root / "password").write_text(PASSWORD)
        _chown_tree(self.root, owner)
        self._as_owner(
            owner,
            "initdb",
            "-D",
            str(self.data),
            "-U",
            USER,
            f"--pwfile={self.root / 'password'}",
            "--auth=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        )
        if self.address != "127.0.0.1":  # clients on the address's network (the multihost tier's bridge)
            network = ".".join(self.address.split(".")[:3]) + ".0/24"
            with open(self.data / "pg_hba.conf", "a") as hba:
                hba.write(f"host all all {network} scram-sha-256\n")
        self.port = self.port or _free_port()
        self.resume()

    def stop(self) -> None:
        """pg_ctl stop -m fast (then immediate), and remove the temp dir."""
        self.pause()
        shutil.rmtree(self.root, ignore_errors=True)

    def pause(self) -> None:
        """Stop the server, keeping its data (`resume` starts it again on the same port)."""
        if (self.data / "postmaster.pid").exists():
            owner = _service_account()
            for mode in ("fast", "immediate"):
                if self._as_owner(owner, "pg_ctl", "-D", str(self.data), "stop", "-m", mode, "-w", check=False) == 0:
                    break

    def resume(self) -> None:
        """Start the server (initialised by `start`) on its address and port."""
        options = f"-c listen_addresses={self.address} -p {self.port} -k {self.root} -c fsync=off -c max_connections=60"
        log = str(self.root / "server.log")
        command = ["pg_ctl", "-D", str(self.data), "-l", log, "-o", options, "-w", "-t", "60", "start"]
        self._as_owner(_service_account(), *command)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{USER}:{PASSWORD}@{self.address}:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """A new, empty database; its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self.url().replace("+psycopg", ""), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def log(self) -> str:
        path = self.root / "server.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def _as_owner(self, owner: str | None, tool: str, *args: str, check: bool = True) -> int:
        command = [str(self.binaries / tool), *args]
        if owner is not None:
            command = ["runuser", "-u", owner, "--", *command]
        done = subprocess.run(self.inside(command), capture_output=True, text=True, timeout=120, cwd=self.root)
        if check and done.returncode != 0:
            raise RuntimeError(f"{tool} failed ({done.returncode}): {done.stdout}{done.stderr}\n{self.log()}")
        return done.returncode


def _service_account() -> str | None:
    """Who runs the server: the current user, or (as root, which PostgreSQL refuses) the `postgres` account."""
    if os.geteuid() != 0:
        return None
    try:
        pwd.getpwnam(SERVICE_ACCOUNT)
    except KeyError:
        subprocess.run(
            ["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SERVICE_ACCOUNT],
            check=True,
            capture_output=True,
        )
    return SERVICE_ACCOUNT


def _chown_tree(root: Path, owner: str | None) -> None:
    if owner is None:
        return
    account = pwd.getpwnam(owner)
    for path in [root, *root.rglob("*")]:
        os.chown(path, account.pw_uid, account.pw_gid)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
