"""A real Infinity embedding server for the tests, started through the product's own `infinity` target from
.venvs/infinity (made by `bash scripts/tool_venvs.sh infinity`, the installer a run uses); the tests that need one
are skipped with that command as the reason when the virtualenv is missing."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import pytest

from recommender.targets import infinity, infinity_venv
from recommender.targets.infinity import SERVED_NAME, InfinityTarget

ROOT = Path(__file__).resolve().parents[1]
VENV = ROOT / ".venvs" / "infinity"
SETUP = "bash scripts/tool_venvs.sh infinity"


@contextlib.contextmanager
def infinity_venv_in_use() -> Iterator[Path]:
    """.venvs/infinity as the virtualenv the infinity target uses (skip when it is not there)."""
    if not (VENV / "bin" / infinity_venv.BINARY).exists():
        pytest.skip(f"no Infinity virtualenv here: {SETUP} (README command two runs it)")
    before = os.environ.get(infinity_venv.ENVIRONMENT)
    os.environ[infinity_venv.ENVIRONMENT] = str(VENV)
    try:
        yield VENV
    finally:
        if before is None:
            os.environ.pop(infinity_venv.ENVIRONMENT, None)
        else:
            os.environ[infinity_venv.ENVIRONMENT] = before


@contextlib.contextmanager
def infinity_server(
    run_dir: Path, engine: str = "torch", batch_size: int = 8, api_key: str | None = None
) -> Iterator[str]:
    """The base URL of an Infinity server serving the packaged MiniLM as SERVED_NAME; stopped on leaving. With
    `api_key`, the server is started with Infinity's own `--api-key`: it answers /health to anyone and everything
    else only to `Authorization: Bearer <api_key>` (an endpoint of someone else's, as the product meets it)."""
    config = {"optimization": engine, "max_batch_size": batch_size}
    plain = infinity.command
    keyed = (lambda *args: [*plain(*args), "--api-key", api_key]) if api_key else plain
    with mock.patch.object(infinity, "command", keyed):
        deployment = InfinityTarget(ready_timeout=180).deploy(None, "model", run_dir, config=config)
    with deployment:
        yield deployment.endpoint


__all__ = ["SERVED_NAME", "infinity_server", "infinity_venv_in_use"]
