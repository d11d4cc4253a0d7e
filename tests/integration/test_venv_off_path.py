"""recommender installed in a virtualenv that is not on PATH, run by its absolute path without activating it (as pipx,
cron, systemd do), with another virtualenv first on PATH: the Python-backend stub must serve with the running
interpreter's packages, not with those of the first `python3` on PATH (issue 23, item 15)."""

from __future__ import annotations

import importlib.util
import os
import site
import subprocess
import sys
from pathlib import Path

import pytest

from recommender.store.results import ResultStore
from tests.fixtures_text import TINY_BERT_YAML

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]

REPO_ROOT = Path(__file__).resolve().parents[2]
OPTIMIZATIONS = ["pt", *(["openvino"] if importlib.util.find_spec("openvino") else [])]
SPEC = (
    "name: off-path\n"
    + TINY_BERT_YAML.format()
    + f"""variants:
  optimizations: [{", ".join(OPTIMIZATIONS)}]
  dynamic_batching: [false]
  instance_counts: [1]
  max_batch_sizes: [4]
traffic:
  warmup_seconds: 1
  phases:
    - {{initial_users: 1, spawn_rate: 0, duration_seconds: 3}}
"""
)


def make_venv(path: Path, system_site_packages: bool) -> Path:
    """A real virtualenv (no pip: nothing is downloaded); returns its bin folder."""
    flags = ["--system-site-packages"] if system_site_packages else []
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", *flags, str(path)], check=True, timeout=120)
    if system_site_packages and sys.prefix != sys.base_prefix:  # run from a venv: its packages are not "system" ones
        purelib = next((path / "lib").glob("python3*/site-packages"))
        (purelib / "outer.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return path / "bin"


def test_a_venv_off_path_serves_with_its_own_packages(tmp_path: Path) -> None:
    served = make_venv(tmp_path / "served", system_site_packages=True)  # has torch, numpy, recommender
    decoy = make_venv(tmp_path / "decoy", system_site_packages=False)  # an empty venv, first on PATH
    script = served / "recommender"  # what pip writes as the console script of the venv
    script.write_text(f"#!{served / 'python'}\nimport sys\nfrom recommender.cli import main\nsys.exit(main())\n")
    script.chmod(0o755)
    (tmp_path / "off-path.yaml").write_text(SPEC)
    env = {
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PATH": os.pathsep.join([str(decoy), "/usr/bin", "/bin"]),  # neither this interpreter's folder nor the venv's
        "PYTHONPATH": str(REPO_ROOT),  # this checkout, not an installed recommender elsewhere
        "COLUMNS": "250",
    }
    done = subprocess.run(
        [str(script), "run", "off-path.yaml"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    results = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("off-path")
    assert {r.name.split("-")[0]: r.status for r in results} == dict.fromkeys(OPTIMIZATIONS, "ok"), [
        r.reason for r in results
    ]
