"""scripts/slim_wheel.py: the nvidia-pytriton wheel for one Python keeps that Python's stub and every vendored library
a kept file names, transitively; drops the rest; RECORD lists what the copy holds; executables stay executable."""

from __future__ import annotations

import importlib.util
import re
import stat
import zipfile
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "slim_wheel.py"
STUBS = "pytriton/tritonserver/python_backend_stubs/"
DIST = "nvidia_pytriton-0.7.0.dist-info/"
MEMBERS = {  # name -> content: a binary names the libraries it links, as an ELF file's .dynstr does
    "pytriton/__init__.py": b"",
    "pytriton/tritonserver/bin/tritonserver": b"\x7fELF...libtritonserver-ab12.so\x00libc.so.6\x00",
    "nvidia_pytriton.libs/libtritonserver-ab12.so": b"\x7fELF...libxml2-cd34.so.2.9\x00",
    "nvidia_pytriton.libs/libxml2-cd34.so.2.9": b"\x7fELF...libicudata-ef56.so.70.1\x00",
    "nvidia_pytriton.libs/libicudata-ef56.so.70.1": b"\x7fELF",
    "nvidia_pytriton.libs/libpython3-9a9a.13.so.1.0": b"\x7fELF",
    "nvidia_pytriton.libs/libunused-0000.so": b"\x7fELF",
    f"{STUBS}3.12/triton_python_backend_stub": b"\x7fELF...libpython3.12.so.1.0\x00",
    f"{STUBS}3.13/triton_python_backend_stub": b"\x7fELF...libpython3-9a9a.13.so.1.0\x00",
    f"{DIST}WHEEL": b"Wheel-Version: 1.0\nTag: py3-none-manylinux_2_35_x86_64\n",
}
EXECUTABLE = 0o100755 << 16


def slim_wheel():
    spec = importlib.util.spec_from_file_location("slim_wheel", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_wheel(folder: Path) -> Path:
    wheel = folder / "nvidia_pytriton-0.7.0-py3-none-manylinux_2_35_x86_64.whl"
    record = "".join(f"{name},sha256=x,{len(data)}\n" for name, data in MEMBERS.items()) + f"{DIST}RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, data in MEMBERS.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = EXECUTABLE if b"ELF" in data else 0o100644 << 16
            archive.writestr(info, data)
        archive.writestr(f"{DIST}RECORD", record)  # names every file: it must not keep them all
    return wheel


def test_the_copy_keeps_one_python_and_the_libraries_it_needs(tmp_path: Path) -> None:
    copy = slim_wheel().slim(write_wheel(tmp_path), tmp_path / "out", "3.12")
    with zipfile.ZipFile(copy) as archive:
        names = set(archive.namelist())
        record = archive.read(f"{DIST}RECORD").decode()
        server = archive.getinfo("pytriton/tritonserver/bin/tritonserver")
    assert names == {
        "pytriton/__init__.py",
        "pytriton/tritonserver/bin/tritonserver",
        "nvidia_pytriton.libs/libtritonserver-ab12.so",
        "nvidia_pytriton.libs/libxml2-cd34.so.2.9",  # named by a kept library: kept, and what it names too
        "nvidia_pytriton.libs/libicudata-ef56.so.70.1",
        f"{STUBS}3.12/triton_python_backend_stub",
        f"{DIST}WHEEL",
        f"{DIST}RECORD",
    }
    assert sorted(line.split(",")[0] for line in record.splitlines()) == sorted(names)
    assert stat.S_IMODE(server.external_attr >> 16) == 0o755


def test_a_python_the_wheel_has_no_stub_for_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"has no Python-backend stub for Python 3\.7"):
        slim_wheel().slim(write_wheel(tmp_path), tmp_path / "out", "3.7")
    with pytest.raises(SystemExit, match="would write over the wheel itself"):
        slim_wheel().slim(write_wheel(tmp_path), tmp_path, "3.12")


def test_drop_removes_the_members_it_names_from_any_wheel(tmp_path: Path) -> None:
    copy = slim_wheel().slim(write_wheel(tmp_path), tmp_path / "out", drop=("*/libpython3-*", "*/3.1?/*"))
    with zipfile.ZipFile(copy) as archive:
        names = set(archive.namelist())
    assert names == set(MEMBERS) - {
        "nvidia_pytriton.libs/libpython3-9a9a.13.so.1.0",
        f"{STUBS}3.12/triton_python_backend_stub",
        f"{STUBS}3.13/triton_python_backend_stub",
    } | {f"{DIST}RECORD"}
    with pytest.raises(SystemExit, match=re.escape("no member matches --drop '*.safetensors'")):
        slim_wheel().slim(write_wheel(tmp_path), tmp_path / "out2", drop=("*.safetensors",))
