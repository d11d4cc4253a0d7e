"""The one way recommender says how to install a package: for the interpreter running it (its virtualenv, whether or
not that is on PATH, as pipx, cron and systemd start it), with the requirement as recommender declares it."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys


def requirement(name: str) -> str:
    """`name` as recommender declares it (a pin, a range, an extra's), e.g. `torch==2.13.0`; the bare name when the
    package metadata does not say (recommender run from a checkout)."""
    try:
        declared = importlib.metadata.requires("recommender") or []
    except importlib.metadata.PackageNotFoundError:
        declared = []
    pattern = re.compile(rf"{re.escape(name)}(?=[<>=!~\[ ;]|$)")
    return next((line.split(";")[0].strip() for line in declared if pattern.match(line)), name)


def pip_install(requirement_text: str, *options: str) -> str:
    """The one install command, for the interpreter running recommender (its virtualenv, on PATH or not)."""
    return " ".join([shlex.quote(sys.executable), "-m", "pip", "install", shlex.quote(requirement_text), *options])
