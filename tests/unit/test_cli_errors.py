"""What a user sees when the command line itself is wrong: a usage message and exit 2, never a traceback."""

import subprocess
import sys

import pytest


@pytest.mark.parametrize(("args", "expected"), [
    (["nosuch"], "No such command 'nosuch'"),
    (["run"], "Missing argument"),
    (["validate", "/nonexistent.yaml"], "no such experiment file"),
])
def test_usage_errors_exit_2_without_traceback(args, expected):
    done = subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr
