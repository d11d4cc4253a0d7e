"""scripts/gpu_run.sh, the prepared run for a GPU host, on its CPU dry run: the same path (offline wheels step, checks,
the experiment, a whole `recommender run` with sampling and ranking, the report) with `accelerator: cpu`, a tiny model
and short levels. No GPU was lent to the session that wrote it: the GPU path itself has not run (docs/gpu.md)."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_run.sh"
PT_VARIANTS = {"pt-nodb-ig1-mbs8", "pt-db-ig1-mbs8", "pt-nodb-ig2-mbs8", "pt-db-ig2-mbs8"}
# each padded to 128 (max: the name as it always was) and at its own length (none: the padding in the name)
CANDIDATES = PT_VARIANTS | {f"{name}-none" for name in PT_VARIANTS}


def gpu_run(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


@pytest.mark.integration
@pytest.mark.slow
@pytest.mark.shares_host
def test_the_cpu_dry_run_measures_and_ranks_the_pt_variants_at_both_paddings(tmp_path: Path) -> None:
    """With one wheel beside it (a stand-in: this host has the run's packages) it installs it offline into its site,
    then runs the whole path."""
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    probe_wheel(wheels)
    done = gpu_run("--cpu-dry-run", "--work", str(tmp_path), "--wheels", str(wheels))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "installing 1 wheels" in done.stdout and (tmp_path / "site" / "gpu_run_probe.py").exists()
    spec = yaml.safe_load((tmp_path / "gpu-run.yaml").read_text())
    assert spec["target"]["accelerator"] == "cpu" and spec["variants"]["optimizations"] == ["pt"]
    assert spec["variants"]["padding"] == ["max", "none"]
    lengths = sorted(len(text.split()) for text in spec["payload"]["texts"])
    assert lengths[len(lengths) // 2] * 2 <= lengths[-1]  # a variable-length payload, not one repeated length
    table = (tmp_path / "table.txt").read_text()
    ranked = [line.split()[1].rstrip(":") for line in table.splitlines() if line.startswith("#")]
    assert set(ranked) == CANDIDATES and "recommended" in table
    assert "queue / compute ms" in table  # the server's figures were sampled
    report = (tmp_path / "report.md").read_text()
    assert all(name in report for name in CANDIDATES)
    assert (tmp_path / ".recommender" / "results.db").exists()


def probe_wheel(folder: Path) -> Path:
    wheel = folder / "gpu_run_probe-1.0-py3-none-any.whl"
    members = {
        "gpu_run_probe.py": "VALUE = 1\n",
        "gpu_run_probe-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: gpu-run-probe\nVersion: 1.0\n",
        "gpu_run_probe-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{name},,\n" for name in [*members, "gpu_run_probe-1.0.dist-info/RECORD"])
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**members, "gpu_run_probe-1.0.dist-info/RECORD": record}.items():
            archive.writestr(name, text)
    return wheel


def test_wheels_over_the_budget_are_refused_before_anything_is_installed(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    with open(wheels / "big-1.0-py3-none-any.whl", "wb") as handle:
        handle.truncate(65 * 1024 * 1024)  # sparse: 65 MiB by size
    done = gpu_run("--cpu-dry-run", "--work", str(tmp_path / "work"), "--wheels", str(wheels), timeout=60)
    assert done.returncode == 2
    assert f"{wheels} holds 65 MiB of wheels, over the 64 MiB limit" in done.stderr
    assert not (tmp_path / "work" / "site").exists()


def test_an_unknown_option_exits_2() -> None:
    done = gpu_run("--gpu-please", timeout=60)
    assert done.returncode == 2 and "unknown option --gpu-please" in done.stderr
