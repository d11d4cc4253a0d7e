"""What a user sees when the command line itself is wrong: a usage message and exit 2, never a traceback."""

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["nosuch"], "No such command 'nosuch'"),
        (["run"], "Missing argument"),
        (["validate", "/nonexistent.yaml"], "no such experiment file"),
    ],
)
def test_usage_errors_exit_2_without_traceback(args, expected):
    done = subprocess.run([sys.executable, "-m", "recommender", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert expected in done.stderr
    assert "Traceback" not in done.stderr


def test_a_non_utf8_experiment_exits_2_naming_the_file(tmp_path):
    """It used to end in UnicodeDecodeError, then an AttributeError in the CLI's own error handler."""
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    done = subprocess.run(
        [sys.executable, "-m", "recommender", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "COLUMNS": "500"},
    )
    assert done.returncode == 2
    assert f"error: {path}: line 1: is not UTF-8 text (byte 0xe9 at offset 9)" in done.stderr and "hint:" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_ctrl_c_sigterm_and_sighup_interrupt_and_say_so(tmp_path, signum, code):
    """A signal while `run` waits for an endpoint that never answers (its preflight): exit 128 + signal, no
    traceback."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        port = silent.getsockname()[1]
        (tmp_path / "remote.yaml").write_text(
            f"name: hang\ntarget: {{kind: remote, endpoint: 'http://127.0.0.1:{port}'}}\n"
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "recommender", "run", "remote.yaml"],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        silent.settimeout(60)
        connection, _ = silent.accept()  # the preflight is waiting for an answer now
        process.send_signal(signum)
        _, stderr = process.communicate(timeout=60)
        connection.close()
    assert process.returncode == code, stderr
    assert f"interrupted ({signal.Signals(signum).name})" in stderr and "Traceback" not in stderr
