"""The ONNX export Infinity's optimum engine reads (infinity_venv.onnx_model_folder) made by two jobs at once: two
real processes export the packaged MiniLM into one folder at the same moment. Both must end with one whole
model.onnx (the lock makes the second wait and find the first's), no staging file left."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import onnxruntime
import pytest

from recommender.targets import infinity_venv

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
EXPORT = (
    "from recommender.modelrepo.model_source import minilm_dir\n"
    "from recommender.targets.infinity_venv import onnx_model_folder\n"
    "print(onnx_model_folder(minilm_dir()))\n"
)


def test_two_jobs_exporting_at_once_both_get_one_whole_model(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), infinity_venv.ENVIRONMENT: str(tmp_path / "venv")}
    jobs = [
        subprocess.Popen([sys.executable, "-c", EXPORT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    done = [(job.wait(timeout=300), *job.communicate()) for job in jobs]
    assert [code for code, _, _ in done] == [0, 0], [err.decode()[-1500:] for _, _, err in done]
    folders = {out.decode().strip() for _, out, _ in done}
    assert len(folders) == 1
    folder = Path(folders.pop())
    assert not (folder / "model.onnx.partial").exists()
    session = onnxruntime.InferenceSession(str(folder / "model.onnx"), providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["input_ids", "attention_mask", "token_type_ids"]
