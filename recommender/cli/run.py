"""`recommender run SPEC`: deploy every variant, drive the traffic, store, rank and print the result."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from recommender.candidates import CandidateResult, RunStatus
from recommender.cli import options
from recommender.cli.plan import plan_table, summary
from recommender.cli.progress import ProgressReporter
from recommender.cli.tables import print_decision
from recommender.decide.recommendation import recommend
from recommender.files import paths
from recommender.job.pipeline import Job, JobOptions
from recommender.load.generators import MasterSettings
from recommender.modelrepo.model_source import describe
from recommender.spec import load_spec
from recommender.store.results import ExperimentStatus, ResultStore

MEASURED = frozenset({RunStatus.OK, RunStatus.PRUNED})  # statuses with measured figures
NOTHING_MEASURED = (
    "[bold red]no candidate was measured[/]: each one failed, was skipped or was incorrect (the reasons are in the "
    "table); fix what they say, then run the same command again (exit 1)."
)


def run(
    spec_file: Path = options.SPEC_FILE,
    db: str = options.DB,
    fresh: bool = typer.Option(False, "--fresh", help="Measure every candidate again, even those already stored."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="List the candidates and the expected duration; deploy nothing."
    ),
    run_dir: Path = typer.Option(paths.RUNS, "--run-dir", help="Where server logs and model repositories go."),
    as_json: bool = typer.Option(
        False,
        "--json",
        help="Print the ranked result as JSON on stdout (the same document "
        "as `recommender rank --json`); progress goes to stderr.",
    ),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="If another job is measuring this experiment, wait for it to finish instead of refusing (exit 2).",
    ),
) -> None:
    """Deploy every serving variant of the experiment on a real Triton server, drive phased Locust traffic at it,
    store the measurements, and print the candidates ranked (the same view as `recommender rank`).

    Candidates already stored (same configuration, same traffic) are not measured again: an interrupted run
    resumes where it stopped. Use --fresh to re-measure. One job measures an experiment at a time (a lease in the
    store); a second one refuses with exit 2, or waits with --wait. Exit 1 when no candidate was measured (each one
    failed, was skipped or was incorrect), after printing the table.

    Optimizations: pt (TorchScript), onnx (ONNX Runtime), openvino (OpenVINO, CPU) and trt (a TensorRT engine built
    from the ONNX export on the candidate's GPU, with TensorRT 10: `pip install 'tensorrt>=10,<11'`). TensorRT 11 is
    refused: it removed the builder's fp16/int8 flags in favour of strongly typed networks, so a trt fp16 engine would
    need an fp16-converted ONNX (e.g. NVIDIA ModelOpt AutoCast) kept in the engine key.
    """
    spec = load_spec(spec_file)
    console = Console(stderr=as_json)  # with --json, stdout holds only the JSON document
    if warning := MasterSettings.from_traffic(spec.traffic).channel_warning:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False, soft_wrap=True)
    if dry_run:
        console.print(plan_table(spec))
        return
    store = ResultStore.open(db)
    described = escape(f"{describe(spec.model)}; {summary(spec)}")  # the file's text, not Rich markup
    console.print(f"[bold]{escape(spec.name)}[/]: {described}", highlight=False)
    if wait and (holder := store.lease_holder(spec.name)):
        console.print(f"waiting for the job measuring {spec.name}: {holder}", highlight=False, soft_wrap=True)
    started = time.monotonic()
    with ProgressReporter(console) as reporter:
        results = Job(spec, store, JobOptions(run_root=run_dir, fresh=fresh, wait=wait), reporter).run()
    rec = recommend(results, spec)
    if as_json:
        typer.echo(json.dumps(rec.to_document(), indent=2))
        _exit_unless_measured(console, results)
        return
    print_decision(console, rec, results)
    if store.experiment(spec.name).status == ExperimentStatus.BUDGET_EXHAUSTED:
        console.print(
            f"[yellow]budget exhausted[/]: ${store.spent(spec.name):.2f} of ${spec.target.budget_usd:.2f} spent over "
            "every run of this experiment; the candidates it did not cover are listed as skipped. Raise "
            "target.budget_usd and run again to measure them.",
            highlight=False,
        )
    console.print(
        f"next: recommender rank {spec.name} | recommender report {spec.name} --format html --out report.html"
        f" | recommender export {spec.name} --out deploy/",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )
    console.print(
        f"done in {time.monotonic() - started:.0f} s; "
        f"results in {store.engine.url.render_as_string(hide_password=True)}",
        highlight=False,
    )
    _exit_unless_measured(console, results)


def _exit_unless_measured(console: Console, results: list[CandidateResult]) -> None:
    """Exit 1 (scripts and CI can tell) when no candidate of the experiment has measured figures."""
    if not any(result.status in MEASURED for result in results):
        console.print(NOTHING_MEASURED, highlight=False, soft_wrap=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.command()(run)
