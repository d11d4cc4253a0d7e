"""`recommender doctor [FILE]`: what this host has and what it lacks, each missing piece with its fix in one line."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from recommender.cli import options
from recommender.doctor.check import Check, blocking
from recommender.doctor.loopback import loopback_check
from recommender.doctor.needs import doctor_checks
from recommender.spec import load_spec

STATES = {"ok": "[green]ok[/]      ", "missing": "[bold red]MISSING[/] ", "optional": "[yellow]absent[/]  "}


def doctor(
    spec_file: Path | None = typer.Argument(
        None,
        readable=False,
        help="Experiment YAML file: check what it needs (its targets, optimizations, accelerator). "
        "Without one: everything, and what the quickstart needs decides the exit.",
    ),
    db: str = options.DB,
    loopback: bool = typer.Option(
        False,
        "--loopback",
        help="Also measure the loopback: how many requests/s one generator process of this host sends to an endpoint "
        "that answers at once (3 s of load; information, never blocking). A candidate near that rate is measured on "
        "the generator: raise traffic.workers.",
    ),
) -> None:
    """Check this host before running anything: Python, the Triton server and its Python-backend stub, the engine of
    each optimization (torch, onnxruntime and its providers, openvino, tensorrt) and its CUDA build against the
    driver, the GPUs (name, memory, MIG, driver, CUDA driver version), Docker, the NVIDIA runtime and the image's
    Triton/TensorRT versions, AWS credentials (present or not, never shown) and the results database.

    Exit 0 when all the file needs is here, else exit 2; `recommender run` checks the same before any server starts.
    """
    spec = load_spec(spec_file) if spec_file is not None else None
    console = Console()
    checks = doctor_checks(spec, db)
    if loopback:
        checks.append(loopback_check())
    for check in checks:
        _print(console, check)
    missing = blocking(checks)
    subject = f"{spec_file} needs" if spec_file is not None else "the quickstart needs"
    if missing:
        console.print(
            f"[bold red]{len(missing)} missing[/]: {', '.join(c.name for c in missing)}; apply each fix above, then "
            f"run `recommender doctor{f' {spec_file}' if spec_file else ''}` again.",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    console.print(f"[green]this host has everything {subject}[/]", highlight=False, soft_wrap=True)


def _print(console: Console, check: Check) -> None:
    state = "ok" if check.passed else "missing" if check.needed else "optional"
    console.print(f"{STATES[state]}{escape(check.name)}: {escape(check.found)}", highlight=False, soft_wrap=True)
    if check.fix is not None:
        console.print(f"        fix: {check.fix}", highlight=False, markup=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    app.command()(doctor)
