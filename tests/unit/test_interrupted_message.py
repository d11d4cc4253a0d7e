"""The line an interrupted command prints says how to resume: a `--fresh` run resumes only without --fresh."""

from __future__ import annotations

import signal

import pytest

from recommender.cli import _interrupted


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["recommender", "run", "x.yaml"], "run the same command again to resume."),
        (["recommender", "run", "x.yaml", "--fresh"], "run the same command again without --fresh to resume."),
    ],
)
def test_the_interrupted_line_says_how_to_resume(capsys, argv, expected):
    assert _interrupted([signal.SIGTERM], argv) == 128 + signal.SIGTERM
    err = " ".join(capsys.readouterr().err.split())
    assert "interrupted (SIGTERM): servers were torn down;" in err and expected in err
