"""The Llama folder (modelrepo/llama.py: the weights vLLM serves) as one GGUF file, the format llama.cpp's server loads,
converted by the converter llama.cpp's own source ships (convert_hf_to_gguf.py, unpacked by llamacpp_venv.py).

    gguf_file(folder, "q8_0", converter, python) -> <folder>.q8_0-<key>.gguf beside the folder (converted once)

The key hashes what decides the file's bytes: every file of the folder (by content), the GGUF type and the
converter's version, so changed weights or another type are another file and an unchanged one is never converted
again. The converter writes to a staging file that is renamed last (a conversion cut short is never taken as done),
under a lock (two jobs convert one at a time). It runs with a Python that has torch, transformers, numpy and
sentencepiece (the caller's choice: vLLM's virtualenv has them), since llama.cpp's virtualenv has none of them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

from recommender.errors import BuildError
from recommender.targets.infinity_venv import locked

# the GGUF types offered: fp32 as the folder holds it (exact), and one quantised type (8-bit blocks)
GGUF_TYPES = ("f32", "q8_0")
CONVERT_TIMEOUT_S = 1800


def gguf_path(folder: Path, gguf_type: str, converter_version: str) -> Path:
    """Where the folder's GGUF of this type is kept: beside the folder, named by its content key."""
    return folder.parent / f"{folder.name}.{gguf_type}-{content_key(folder, gguf_type, converter_version)}.gguf"


def content_key(folder: Path, gguf_type: str, converter_version: str) -> str:
    """16 hex digits of every file in the folder (name and bytes), the type and the converter's version."""
    digest = hashlib.sha256(f"{gguf_type}\0{converter_version}\0".encode())
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(folder)).encode() + b"\0")
        with open(path, "rb") as data:
            for block in iter(lambda: data.read(1 << 20), b""):
                digest.update(block)
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def gguf_file(folder: Path, gguf_type: str, converter: Path, python: Path, converter_version: str) -> Path:
    """The folder as GGUF of `gguf_type`, converted on first use (BuildError with the converter's last line when
    it fails: its whole output is kept beside the file as <file>.log)."""
    if gguf_type not in GGUF_TYPES:
        raise BuildError(f"GGUF type {gguf_type!r} is not one of {', '.join(GGUF_TYPES)}")
    target = gguf_path(folder, gguf_type, converter_version)
    if target.exists():
        return target
    with locked(target):
        if target.exists():  # another job converted it meanwhile
            return target
        staging = target.with_name(f"{target.name}.tmp{os.getpid()}")
        log = target.with_name(f"{target.name}.log")
        command = [str(python), str(converter), str(folder), "--outfile", str(staging), "--outtype", gguf_type]
        try:
            with open(log, "w") as out:
                done = subprocess.run(
                    command, stdout=out, stderr=subprocess.STDOUT, check=False, timeout=CONVERT_TIMEOUT_S
                )
            if done.returncode != 0 or not staging.exists():
                tail = log.read_text(errors="replace").strip().splitlines()
                raise BuildError(
                    f"converting {folder} to GGUF {gguf_type} failed (exit {done.returncode}): "
                    f"{tail[-1] if tail else 'no output'}",
                    hint=f"see {log}",
                )
            staging.rename(target)  # last: the file is whole
        except subprocess.TimeoutExpired:
            raise BuildError(
                f"converting {folder} to GGUF {gguf_type} took over {CONVERT_TIMEOUT_S} s", hint=f"see {log}"
            ) from None
        finally:
            staging.unlink(missing_ok=True)
    return target
