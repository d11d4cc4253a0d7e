"""containers/triton-cpu/build_image.py as a module (a script in a folder that is no package), for the tier's image
and the unit tests of its pure parts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def image_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_image", ROOT / "containers" / "triton-cpu" / "build_image.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
