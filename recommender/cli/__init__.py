"""The `recommender` command line. Each command (or command group) lives in the module named for it, with a
`register(app)` function; options shared by several commands are in options.py. The CLI only presents: it reads
files and the store, calls the pipeline and the decision code, and prints."""

from __future__ import annotations

import importlib
import sys

import typer
from rich.console import Console

from recommender.errors import RecommenderError, SpecError

INTERRUPTED = "[yellow]interrupted[/]: servers were torn down; run the same command again to resume."

COMMAND_MODULES = ("run", "plan", "validate", "schema", "rank", "report", "export", "cost", "prices", "cleanup",
                   "import_", "dashboard")


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="recommender",
        help="Benchmark model-serving configurations on real servers with real traffic, then recommend one: "
        "which configuration, how many instances, at what cost, under your latency target.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_enable=False,
    )
    for module in COMMAND_MODULES:
        importlib.import_module(f"recommender.cli.{module}").register(app)
    return app


def report_error(error: RecommenderError, console: Console | None = None) -> int:
    """Print a RecommenderError the way users read it: message, problems, hint. Returns the exit code."""
    console = console or Console(stderr=True)
    console.print(f"[bold red]error:[/] {error.message}", highlight=False)
    if isinstance(error, SpecError):
        for line in error.problems:
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    if error.hint:
        console.print(f"[yellow]hint:[/] {error.hint}", highlight=False)
    return error.exit_code


def _click_modules() -> list:
    """click itself, plus the copy typer >= 0.26 vendors (its exceptions are distinct classes)."""
    import click

    modules = [click]
    try:
        from typer import _click

        modules.append(_click)
    except ImportError:
        pass
    return modules


def main() -> None:
    app = build_app()
    try:
        code = app(standalone_mode=False)  # click returns the exit code of Exit / Abort (130 on Ctrl-C)
    except RecommenderError as error:
        sys.exit(report_error(error))
    except KeyboardInterrupt:
        Console(stderr=True).print(INTERRUPTED)
        sys.exit(130)
    except typer.Exit as exit_:
        sys.exit(exit_.exit_code)
    except Exception as exc:  # usage errors and aborts from (typer's vendored) click
        clicks = _click_modules()
        if isinstance(exc, tuple(m.exceptions.ClickException for m in clicks)):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, tuple(m.exceptions.Abort for m in clicks)):
            Console(stderr=True).print(INTERRUPTED)
            sys.exit(130)
        raise
    if code == 130:
        Console(stderr=True).print(INTERRUPTED)
    sys.exit(code if isinstance(code, int) else 0)
