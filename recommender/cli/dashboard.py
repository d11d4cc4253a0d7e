"""`recommender dashboard`: start the Streamlit app (dashboard/app.py) on loopback and stop it cleanly on Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import typer
from rich.console import Console

from recommender.cli import options
from recommender.errors import RecommenderError
from recommender.store.database import resolve_url
from recommender.store.results import ResultStore

REPO_ROOT = Path(__file__).resolve().parents[2]
APP = REPO_ROOT / "dashboard" / "app.py"  # a source checkout (pip install -e .)
STOP_TIMEOUT_S = 10
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)  # explicit: a shell's background job inherits SIGINT ignored


def find_app() -> Path:
    """dashboard/app.py of the source checkout, else of the working directory (the infra image installs the package
    non-editable and keeps dashboard/ in its WORKDIR)."""
    for candidate in (APP, Path.cwd() / "dashboard" / "app.py"):
        if candidate.is_file():
            return candidate.resolve()
    raise RecommenderError(
        f"the dashboard app is not at {APP} nor in ./dashboard",
        hint="run from a source checkout (pip install -e .) or from a folder that holds dashboard/",
    )


def streamlit_command(app: Path, host: str, port: int) -> list[str]:
    """The `streamlit run` command line: headless, bound to `host`, no usage statistics, no file watcher, no Deploy
    button."""
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(app),
        "--server.headless=true",
        f"--server.address={host}",
        f"--server.port={port}",
        "--browser.gatherUsageStats=false",
        "--server.fileWatcherType=none",
        "--global.developmentMode=false",
        "--client.toolbarMode=viewer",
    ]


def dashboard_env(db: str | None, app: Path = APP) -> dict[str, str]:
    """The environment of the Streamlit process: the resolved DB URL and the folder holding dashboard/ on PYTHONPATH."""
    url = resolve_url(db)
    if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
        url = f"sqlite:///{Path(url.removeprefix('sqlite:///')).resolve()}"  # independent of the app's cwd
    paths = [str(app.parent.parent), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "RECOMMENDER_DB_URL": url, "PYTHONPATH": os.pathsep.join(paths)}


def dashboard(
    db: str = options.DB,
    port: int = typer.Option(8501, "--port", min=0, max=65535, help="Port to serve on."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to bind (loopback by default: the app has no login)."
    ),
) -> None:
    """Open the ranking, comparison, curves and cost dashboard (Streamlit) on http://HOST:PORT. It reads the
    database a run wrote: start it once `recommender run` has begun (a missing SQLite file is an error, not made)."""
    app = find_app()
    ResultStore.open(db, existing=True)  # a wrong --db is said here, exit 2, before a browser page would say it
    console = Console(stderr=True)
    console.print(f"dashboard on http://{host}:{port} (Ctrl-C to stop)", highlight=False)
    process = subprocess.Popen(streamlit_command(app, host, port), env=dashboard_env(db, app))
    previous = {signum: signal.signal(signum, _raise_interrupt) for signum in STOP_SIGNALS}
    try:
        code = process.wait()
    except KeyboardInterrupt:
        code = stop(process)
        console.print("dashboard stopped", highlight=False)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if code not in (0, -signal.SIGINT, -signal.SIGTERM):
        raise typer.Exit(code)


def stop(process: subprocess.Popen) -> int:
    """SIGTERM (Streamlit shuts down cleanly on it), then SIGKILL if it has not exited in time."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait()


def _raise_interrupt(_signum, _frame) -> None:
    raise KeyboardInterrupt


def register(app: typer.Typer) -> None:
    app.command("dashboard")(dashboard)
