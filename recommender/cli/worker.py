"""`recommender worker --master HOST:PORT`: a Locust load worker on another host, joining a run's master.

The run's experiment says how many remote workers to wait for (`traffic.remote_workers`) and where its master listens
(`traffic.master_bind`, `traffic.master_port`). The worker needs no experiment file: the master sends it the model,
the traffic plan, the request bodies and the target's URL over Locust's own message channel. An endpoint's API key
never crosses that channel (plain text, unauthenticated): the master names the variable (`target.api_key_env`) and
the worker reads the key from its own environment, so export it on the worker's host first.
"""

from __future__ import annotations

import itertools
import socket

import typer
from rich.console import Console

from recommender.errors import InputError, UsageError
from recommender.load.config import WORKER_LEFT_EXIT
from recommender.load.generators import LOCUST_MASTER_PORT
from recommender.load.runner import run_worker


def parse_master(text: str) -> tuple[str, int]:
    """'HOST:PORT', 'HOST' (Locust's port 5557) or '[IPv6]:PORT' -> (host, port); the host must resolve."""
    head, _, tail = text.strip().rpartition(":")
    host, port = (head.strip("[]"), tail) if tail.isdigit() else (text.strip(), "")
    number = int(port) if port else LOCUST_MASTER_PORT
    if not host or not 1 <= number <= 65535:
        raise UsageError(
            f"--master {text!r} is not HOST:PORT", hint="e.g. --master 10.0.0.5:5557 (traffic.master_port)"
        )
    try:
        socket.getaddrinfo(host, number, type=socket.SOCK_STREAM)
    except socket.gaierror as error:
        raise UsageError(
            f"--master {text!r}: the host {host!r} does not resolve ({error.strerror})",
            hint="give the master's IP address or a name this host can resolve",
        ) from None
    return host, number


def worker(
    master: str = typer.Option(
        ..., "--master", help="The run's Locust master, HOST:PORT (PORT: traffic.master_port, default 5557)."
    ),
    runs: int = typer.Option(0, "--runs", min=0, help="Serve this many runs, then exit (0: until interrupted)."),
) -> None:
    """Join runs as a load worker: wait for the master at HOST:PORT, drive the load it assigns, send every request's
    record to it; then wait for the next run's master. Every candidate's load run has its own master, so a worker
    serves one run after another. The target's URL must be reachable from this host."""
    host, port = parse_master(master)
    console = Console(stderr=True)
    for number in itertools.count(1):
        console.print(f"worker: waiting for the master at {host}:{port} (run {number})", highlight=False)
        code = run_worker(host, port)
        if code == WORKER_LEFT_EXIT:  # every later run would need the same: stop here
            raise InputError(
                f"worker: left the run of the master at {host}:{port}: this host lacks what the run needs (said above)",
                hint="export the variable the line above names (target.api_key_env), then start the worker again",
            )
        console.print(f"worker: run {number} ended (Locust worker exit {code})", highlight=False)
        if runs and number >= runs:
            raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command()(worker)
