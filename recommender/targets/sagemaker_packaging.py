"""Package a Triton model repository as the `model.tar.gz` SageMaker's Triton container expects.

SageMaker extracts the archive into /opt/ml/model and starts tritonserver with that folder as the
model repository, so every model folder (`<model>/config.pbtxt`, `<model>/<version>/...`) must sit at
the archive root, not under a parent folder. Symlinks are dereferenced: the container receives files.
"""

from __future__ import annotations

import tarfile
from pathlib import Path

from recommender.errors import BuildError

ARCHIVE_NAME = "model.tar.gz"
SKIPPED_NAMES = frozenset({"__pycache__", ".DS_Store", ".ipynb_checkpoints"})


def model_folders(repository: Path) -> list[Path]:
    """The model folders of a Triton repository: sub-folders holding a config.pbtxt and a numeric version folder."""
    if not repository.is_dir():
        raise BuildError(
            f"{repository}: no such model repository folder",
            hint="Give the folder that holds <model>/config.pbtxt and <model>/1/.",
        )
    folders = [child for child in sorted(repository.iterdir()) if (child / "config.pbtxt").is_file()]
    if not folders:
        raise BuildError(
            f"{repository}: no model folder with a config.pbtxt",
            hint="A Triton repository looks like <root>/<model>/config.pbtxt plus <root>/<model>/1/.",
        )
    for folder in folders:
        if not any(child.is_dir() and child.name.isdigit() for child in folder.iterdir()):
            raise BuildError(
                f"{folder}: no numeric version folder (e.g. {folder.name}/1/)",
                hint="Triton loads models from numbered version folders.",
            )
    return folders


def package_repository(repository: Path, destination: Path, model_name: str | None = None) -> Path:
    """Write `destination` (a .tar.gz) with every model folder of `repository` at the archive root; return it."""
    repository = Path(repository)
    folders = model_folders(repository)
    if model_name is not None and model_name not in {folder.name for folder in folders}:
        raise BuildError(
            f"{repository}: model {model_name!r} not found (found: {', '.join(f.name for f in folders)})",
            hint="The model name must be the folder name next to its config.pbtxt.",
        )
    destination = Path(destination)
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(destination, "w:gz", dereference=True) as archive:
        for folder in folders:
            _add_tree(archive, folder, folder.name)
    return destination


def _add_tree(archive: tarfile.TarFile, path: Path, arcname: str) -> None:
    """Add `path` under `arcname`, sorted (stable archives), following symlinks, with neutral ownership."""
    if path.name in SKIPPED_NAMES:
        return
    if not path.exists():
        raise BuildError(
            f"{path}: broken symlink in the model repository", hint="Fix or remove the link before packaging."
        )
    archive.add(path, arcname=arcname, recursive=False, filter=_neutral_owner)
    if path.is_dir():
        for child in sorted(path.iterdir()):
            _add_tree(archive, child, f"{arcname}/{child.name}")


def _neutral_owner(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info
