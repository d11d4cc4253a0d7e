"""The `recommender` command line. Each command (or command group) lives in the module named for it, with a
`register(app)` function; options shared by several commands are in options.py. The CLI only presents: it reads
files and the store, calls the pipeline and the decision code, and prints."""

from __future__ import annotations

import signal
import sys

import typer
from rich.console import Console
from rich.markup import escape

from recommender.errors import Interrupted, RecommenderError, SpecError

INTERRUPTED = "[yellow]interrupted[/] ({name}): servers were torn down; run the same command again{without} to resume."

INTERRUPTING_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def build_app() -> typer.Typer:
    app = typer.Typer(
        name="recommender",
        help="Benchmark model-serving configurations on real servers with real traffic, then recommend one: "
        "which configuration, how many instances, at what cost, under your latency target.",
        no_args_is_help=True,
        rich_markup_mode="rich",
        pretty_exceptions_enable=False,
    )
    from recommender.cli import (  # each command's module registers it; imported here so `--help` stays one import
        cleanup,
        cost,
        dashboard,
        doctor,
        export,
        import_,
        plan,
        prices,
        rank,
        report,
        run,
        schema,
        validate,
        worker,
    )

    for module in (
        run,
        plan,
        validate,
        doctor,
        schema,
        rank,
        report,
        export,
        cost,
        prices,
        cleanup,
        import_,
        dashboard,
        worker,
    ):
        module.register(app)
    return app


def report_error(error: RecommenderError, console: Console | None = None) -> int:
    """Print a RecommenderError the way users read it: message, problems, hint. Returns the exit code."""
    console = console or Console(stderr=True)
    # a message quotes the user's files (paths, lines, column names): printed as text, never read as Rich markup
    console.print(f"[bold red]error:[/] {escape(error.message)}", highlight=False)
    if isinstance(error, SpecError):
        for line in error.problems:
            console.print(f"  {line}", highlight=False, markup=False, soft_wrap=True)
    if error.hint:
        console.print(f"[yellow]hint:[/] {escape(error.hint)}", highlight=False)
    return error.exit_code


def main(args: list[str] | None = None) -> None:
    """The console entry point. Typer runs in standalone mode: a usage error prints click's message and exits 2.
    Ctrl-C, SIGTERM and SIGHUP all interrupt the same way (servers torn down, the run recorded interrupted) and exit
    128 + the signal's number: 130, 143, 129; a second signal while that happens is ignored. A RecommenderError
    leaving a command is printed here (message, problems, hint) and exits with its code. Only public APIs: no
    private click or typer modules."""
    received: list[int] = []
    previous = {signum: signal.signal(signum, _interrupt_once(received)) for signum in INTERRUPTING_SIGNALS}
    try:
        build_app()(args=args, prog_name="recommender")
    except RecommenderError as error:
        sys.exit(report_error(error))
    except KeyboardInterrupt:  # before a command ran (while modules were importing)
        sys.exit(_interrupted(received))
    except SystemExit as done:
        if done.code == 130 or received:
            sys.exit(_interrupted(received))
        raise
    finally:  # main() called in process (tests) leaves the handlers as it found them
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt_once(received: list[int]):
    """A handler raising Interrupted in the main thread for the first signal; a later one is only noted (teardown is
    never cut short). Received signals are appended to `received`."""

    def interrupt(signum: int, frame: object) -> None:
        received.append(signum)
        if len(received) == 1:
            raise Interrupted(signum)
        Console(stderr=True).print(f"[yellow]{signal.Signals(signum).name}[/]: already stopping; tearing down.")

    return interrupt


def _interrupted(received: list[int], argv: list[str] | None = None) -> int:
    """Say how to resume (`--fresh` would measure every candidate again) and return the signal's exit status."""
    name = signal.Signals(received[0]).name if received else "SIGINT"
    without = " without --fresh" if "--fresh" in (sys.argv if argv is None else argv) else ""
    Console(stderr=True).print(INTERRUPTED.format(name=name, without=without), highlight=False)
    return 128 + (received[0] if received else signal.SIGINT)
