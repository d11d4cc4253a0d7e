"""A fake `docker` executable for the process boundary of the unit tier (the docker tier, tests/docker, runs a real
engine): it appends each call's arguments to calls.log and its session id to sessions.log, and answers from canned
replies, one file per subcommand (ps.out, image.out for `image inspect`, info.out; run.rc and ps.rc make those fail)."""

from __future__ import annotations

import os
from pathlib import Path

SCRIPT = """#!/bin/sh
dir=$(dirname "$0")
echo "$*" >> "$dir/calls.log"
cut -d' ' -f6 /proc/$$/stat >> "$dir/sessions.log"
case "$1" in
  run) if [ -f "$dir/run.rc" ]; then
         echo "docker: Error response from daemon: port is already allocated." >&2; exit $(cat "$dir/run.rc")
       fi
       echo 0123456789abcdef ;;
  ps) [ -f "$dir/ps.rc" ] && { echo "Cannot connect to the Docker daemon at unix:///var/run/docker.sock." >&2; exit 1; }
      cat "$dir/ps.out" 2>/dev/null ;;
  inspect) echo true ;;
  version) echo 27.0.0 ;;
  image) cat "$dir/image.out" 2>/dev/null ;;
  info) cat "$dir/info.out" 2>/dev/null ;;
esac
exit 0
"""


def install_fake_docker(directory: Path, monkeypatch) -> Path:
    """Put the fake docker first on PATH; returns its directory (where calls.log and the canned replies are)."""
    directory.mkdir(parents=True, exist_ok=True)
    executable = directory / "docker"
    executable.write_text(SCRIPT)
    executable.chmod(0o755)
    monkeypatch.setenv("PATH", f"{directory}{os.pathsep}{os.environ['PATH']}")
    return directory


def calls(directory: Path) -> list[str]:
    log = directory / "calls.log"
    return log.read_text().splitlines() if log.exists() else []
