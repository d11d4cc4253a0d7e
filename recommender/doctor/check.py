"""One host check: what is there, or what is missing with the fix in one line, and whether the experiment needs it."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

from recommender.errors import RecommenderError


@dataclass(frozen=True)
class Check:
    """`found` says what is there (or what is wrong); `fix` is None when the check passed, else the one line that
    fixes it. A check that is not `needed` is shown for information: its failure does not fail the host."""

    name: str
    found: str
    fix: str | None = None
    needed: bool = True

    @property
    def passed(self) -> bool:
        return self.fix is None

    @property
    def blocking(self) -> bool:
        return self.needed and not self.passed

    def needed_if(self, needed: bool) -> Check:
        return replace(self, needed=needed)


def checked(name: str, describe: Callable[[], str]) -> Check:
    """A check made of a preflight: what `describe` returns when it passes; its RecommenderError's message and hint
    (the fix) when it refuses. The run calls the same preflights, so both say the same thing."""
    try:
        return Check(name, describe())
    except RecommenderError as error:
        return Check(name, error.message, error.hint or "see the message")


def blocking(checks: Iterable[Check]) -> list[Check]:
    """The checks that fail and are needed: the host cannot run the experiment until each is fixed."""
    return [check for check in checks if check.blocking]
