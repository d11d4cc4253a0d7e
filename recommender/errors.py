"""One exception tree for the whole package; only the CLI turns these into messages and exit codes. Every message,
problem and hint is redacted when the error is made (redaction.redact): a credential in a URL or a header never
reaches the terminal, a log or the store (a failed run's reason)."""

from __future__ import annotations

import signal

from recommender.redaction import redact


class RecommenderError(Exception):
    """Base of every error the platform raises on purpose. `hint` tells the user how to fix it."""

    exit_code = 1

    def __init__(self, message: str, hint: str | None = None) -> None:
        message = redact(message)
        super().__init__(message)
        self.message = message
        self.hint = None if hint is None else redact(hint)


class InputError(RecommenderError):
    """A file the user named (an experiment, a job request, a price list, a model, a database URL file) is missing,
    unreadable, too big, binary, not UTF-8 or not parseable. The message names the file and the reason."""

    exit_code = 2


class UsageError(RecommenderError):
    """The command line asks for something unsafe: writing over an existing output without --force, or a cleanup
    with no scope. The message names the path or the flag."""

    exit_code = 2


class SpecError(InputError):
    """An experiment file is missing, unreadable or invalid. `problems` holds one line per field."""

    def __init__(self, message: str, problems: list[str] | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint)
        self.problems = [redact(problem) for problem in problems or []]


class BuildError(RecommenderError):
    """A model could not be exported or a model repository could not be written."""


class TargetError(RecommenderError):
    """A serving target failed its preflight, could not deploy, or did not become ready."""


class TargetUnreachable(TargetError):
    """The target does not answer at all (no connection, a timeout): not a refusal, the endpoint is gone."""


class LoadError(RecommenderError):
    """The load generator could not start or did not produce a result."""


class StoreError(RecommenderError):
    """The results database could not be opened, migrated, read or written."""


class ExperimentLeased(StoreError):
    """Another live job holds the experiment's lease: it is measuring that experiment now."""

    exit_code = 2


class CostError(RecommenderError):
    """A price is unknown, a price list could not be read or refreshed, or a cost or capacity input is impossible."""


class CatalogError(CostError, InputError):
    """A price catalog file cannot be read or is malformed: a cost error and the user's input (exit 2)."""


class RankingError(RecommenderError):
    """Ranking inputs or preferences are invalid (an unknown importance level, an inverted interval)."""


class CandidateSkipped(RecommenderError):
    """A candidate cannot run on this host (for example TensorRT without a GPU); recorded as skipped."""


class ExportError(RecommenderError):
    """A recommendation cannot be exported: nothing eligible, a rank out of range, or an output folder in the way."""


class IncorrectExport(ExportError):
    """The export asked for a candidate the correctness gate found incorrect: it is never exported."""

    exit_code = 2


class TrackingError(RecommenderError):
    """An experiment tracker (MLflow) refused the export or cannot be reached; the URI or the server is the user's to
    fix."""

    exit_code = 2


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, SIGTERM or SIGHUP received: handled exactly as Ctrl-C is (everything torn down, the run recorded
    interrupted); the CLI exits 128 + the signal's number (130, 143, 129)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interruption_reason(interrupt: KeyboardInterrupt) -> str:
    """The one-line reason a run stopped by a signal is recorded with, e.g. 'interrupted by SIGTERM'."""
    if isinstance(interrupt, Interrupted) and interrupt.signum != signal.SIGINT:
        return f"interrupted by {signal.Signals(interrupt.signum).name}"
    return "interrupted by the user (Ctrl-C)"
