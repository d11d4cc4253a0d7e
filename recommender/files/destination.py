"""Where outputs go: the file or folder a user names with --out is never written over without --force, and a
name taken from an input file (a job's JobName, a model name) always stays inside the folder chosen for it."""

from __future__ import annotations

import re
from pathlib import Path

from recommender.errors import InputError, UsageError

SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # no separators, never "." or "..", never absolute


def claim_file(path: Path, force: bool, flag: str = "--out") -> Path:
    """`path` ready to receive a new file (its folder created); UsageError for a folder, or for an existing
    file unless `force`."""
    path = Path(path)
    if path.is_dir():
        raise UsageError(
            f"{path} is a folder; {flag} names the file to write",
            hint=f"Give a file name, e.g. {flag} {path / 'report.md'}.",
        )
    if (path.exists() or path.is_symlink()) and not force:
        raise UsageError(
            f"{path} already exists; not writing over it without --force",
            hint=f"Pass --force to replace it, or choose another {flag}.",
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def claim_folder(path: Path, force: bool, flag: str = "--out") -> Path:
    """`path` ready to receive files (created when missing); UsageError for a file, or for a folder that is not
    empty unless `force`."""
    path = Path(path)
    if (path.exists() or path.is_symlink()) and not path.is_dir():
        raise UsageError(f"{path} is a file; {flag} names a folder to write into", hint=f"Choose another {flag}.")
    if path.is_dir() and any(path.iterdir()) and not force:
        raise UsageError(
            f"{path} is not empty; not writing into it without --force",
            hint=f"Pass --force to replace what the export writes there, or choose a new or empty {flag}.",
        )
    path.mkdir(parents=True, exist_ok=True)
    return path


def write_text(path: Path, text: str, force: bool, flag: str = "--out") -> Path:
    """Write a new file (exclusive create: nothing appearing meanwhile is clobbered), or replace one with `force`."""
    path = claim_file(path, force, flag)
    try:
        with open(path, "w" if force else "x", encoding="utf-8") as handle:
            handle.write(text)
    except FileExistsError:
        raise UsageError(
            f"{path} already exists; not writing over it without --force",
            hint=f"Pass --force to replace it, or choose another {flag}.",
        ) from None
    except OSError as exc:
        raise UsageError(
            f"{path} cannot be written ({exc.strerror or exc})", hint=f"Choose a writable {flag} location."
        ) from None
    return path


def plain_name(name: object, what: str) -> str:
    """`name` (read from an input file) when it can name a file in a folder and nothing else; else InputError."""
    if not isinstance(name, str) or not SAFE_NAME.fullmatch(name):
        raise InputError(
            f"{what} {name!r} cannot name a file: use letters, digits, '.', '_' and '-', starting with a "
            "letter or digit, at most 128 characters (no '/', '\\' or '..')",
            hint="Rename it in the input file, or pass --out with a file name of your own.",
        )
    return name


def inside(folder: Path, name: object, what: str) -> Path:
    """folder/name for a `name` read from an input file; InputError unless it stays directly inside `folder`."""
    path = Path(folder) / plain_name(name, what)
    if path.resolve().parent != Path(folder).resolve():  # a symlink of that name pointing elsewhere
        raise InputError(f"{what} {name!r}: {path} leads outside {folder}", hint="Remove that link, or pass --out.")
    return path
