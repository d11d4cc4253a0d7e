"""The virtualenv Infinity runs from: made by recommender on first use and kept, so infinity-emb's pins (its own
torch, transformers, optimum) never touch recommender's environment.

    server_binary(say) -> <venv>/bin/infinity_emb     (created once, with a progress line; a lock keeps two jobs apart)

Half-made is never taken as made: the virtualenv counts as installed only once its completion marker (MARKER, the
requirements it was made with) exists, written after pip succeeded; an install cut short (a killed job, a full disk)
leaves a binary and no marker, and the next use installs again (pip finishes what is missing). The ONNX export
beside the model is written to a staging file and renamed last, under a lock (two jobs export one at a time).

Where: $RECOMMENDER_INFINITY_VENV, else ~/.cache/recommender/venvs/infinity-emb-<version> (`scripts/tool_venvs.sh
infinity` makes .venvs/infinity for the test tier, which points the variable there).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

from recommender.errors import TargetError

VERSION = "0.0.78"
# its ONNX engine, pinned apart: optimum 2 (what infinity-emb's own `optimum` extra installs today) breaks it, and
# optimum's onnxruntime extra pulls datasets with a pyarrow that needs NumPy 2, which infinity-emb refuses
REQUIREMENTS = (  # the same pins as scripts/tool_venvs.sh
    f"infinity-emb[server,torch]=={VERSION}",
    "optimum==1.24.0",
    "transformers==4.48.3",  # the newest its optimum 1.24's onnxruntime module imports with
    "onnx==1.23.2",
    "onnxruntime==1.32.0",
)
REQUIREMENT = " ".join(REQUIREMENTS)
ENVIRONMENT = "RECOMMENDER_INFINITY_VENV"
BINARY = "infinity_emb"
MARKER = ".recommender-installed"  # written last by _install: holds REQUIREMENT


def venv_dir() -> Path:
    given = os.environ.get(ENVIRONMENT)
    if given:
        return Path(given).expanduser()
    return Path.home() / ".cache" / "recommender" / "venvs" / f"infinity-emb-{VERSION}"


def server_binary(say: Callable[[str], None] = lambda line: print(line, file=sys.stderr)) -> Path:
    """The `infinity_emb` command, installing its virtualenv first when it is not there (minutes, once)."""
    folder = venv_dir()
    binary = folder / "bin" / BINARY
    if installed(folder):
        return binary
    with locked(folder):  # a second job waits for the first one's install
        if not installed(folder):
            _install(folder, say)
    return binary


def installed(folder: Path) -> bool:
    """The virtualenv was made to the end with today's requirements: its marker says so (the binary alone does not:
    pip writes it before the install is over)."""
    try:
        return (folder / MARKER).read_text(encoding="utf-8") == REQUIREMENT
    except (OSError, UnicodeDecodeError):
        return False


@contextlib.contextmanager
def locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder`'s making (a file beside it), held until the block ends."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f".{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _install(folder: Path, say: Callable[[str], None]) -> None:
    log = folder.parent / f"{folder.name}.install.log"
    say(f"infinity: installing {REQUIREMENT} into {folder} (once; a few minutes; log: {log})")
    with open(log, "w") as out:
        steps = (
            [sys.executable, "-m", "venv", str(folder)],
            [str(folder / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check", *REQUIREMENTS],
        )
        for step in steps:
            if subprocess.run(step, stdout=out, stderr=subprocess.STDOUT, check=False).returncode != 0:
                tail = log.read_text(errors="replace")[-1500:]
                raise TargetError(
                    f"installing {REQUIREMENT} into {folder} failed: {tail.strip().splitlines()[-1] if tail else ''}",
                    hint=f"see {log}; set {ENVIRONMENT} to a virtualenv where `pip install {REQUIREMENT}` worked",
                )
    (folder / MARKER).write_text(REQUIREMENT, encoding="utf-8")  # last: the install is whole
    say(f"infinity: installed into {folder}")


def onnx_model_folder(model_dir: Path) -> Path:
    """The model folder with an ONNX export of its encoder beside its files, for Infinity's optimum engine (which
    reads *.onnx from the folder and pools itself): the packaged files linked, model.onnx exported once (seconds) by
    recommender's own torch with the exporter the Triton ONNX candidates use (the venv's optimum 1.24 cannot export
    with its torch), last_hidden_state out. Two jobs export one at a time (a lock): the second finds the first's."""
    folder = venv_dir() / "models" / f"{model_dir.name}-onnx"
    if (folder / "model.onnx").exists():
        return folder
    with locked(folder):
        if not (folder / "model.onnx").exists():
            _export_onnx(model_dir, folder)
    return folder


def _export_onnx(model_dir: Path, folder: Path) -> None:
    """The packaged files linked into `folder`, and model.onnx exported to a staging file, renamed last."""
    folder.mkdir(parents=True, exist_ok=True)
    for item in model_dir.iterdir():
        link = folder / item.name
        if not link.exists():
            link.symlink_to(item)
    staging = folder / "model.onnx.partial"
    done = subprocess.run(
        [sys.executable, "-c", _EXPORT, str(model_dir), str(staging)],
        capture_output=True,
        text=True,
        check=False,
        env=os.environ | {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )
    if done.returncode != 0 or not staging.exists():
        raise TargetError(
            f"exporting {model_dir} to ONNX for Infinity's optimum engine failed",
            hint=(done.stderr or done.stdout)[-1500:],
        )
    staging.rename(folder / "model.onnx")


_EXPORT = """
import sys, torch
from transformers import AutoModel
model = AutoModel.from_pretrained(sys.argv[1]).eval()
class Encoder(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model
    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.model(
            input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
        ).last_hidden_state
names = ["input_ids", "attention_mask", "token_type_ids"]
ids = torch.ones(1, 8, dtype=torch.int64)
axes = {name: {0: "batch", 1: "sequence"} for name in [*names, "last_hidden_state"]}
with torch.no_grad():
    torch.onnx.export(
        Encoder(model), (ids, ids, torch.zeros_like(ids)), sys.argv[2], input_names=names,
        output_names=["last_hidden_state"], dynamic_axes=axes, opset_version=17, dynamo=False,
    )
"""


def pooling_of(model_dir: Path) -> str:
    """The model's own pooling (sentence-transformers' 1_Pooling/config.json): mean, cls or max; mean when unsaid.
    Passed to Infinity explicitly: its `auto` pooling picked CLS for an ONNX export of all-MiniLM-L6-v2 here."""
    try:
        config = json.loads((model_dir / "1_Pooling" / "config.json").read_text())
    except (OSError, ValueError):
        return "mean"
    for method, key in (("cls", "pooling_mode_cls_token"), ("max", "pooling_mode_max_tokens")):
        if config.get(key):
            return method
    return "mean"


if __name__ == "__main__":  # scripts/tool_venvs.sh: make the virtualenv ahead of a run (RECOMMENDER_INFINITY_VENV)
    print(server_binary())
