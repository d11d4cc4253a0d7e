"""The correctness gate on the real local Triton server: an onnx export passes at fp32; a TorchScript artifact whose
weights were perturbed (planted in the export cache, as a broken export would leave it) is caught before any load,
recorded `incorrect` with its figures, excluded from the ranking with that reason, and never exported."""

from __future__ import annotations

import pytest

from recommender.candidates import model_fingerprint
from recommender.modelrepo.export import export_model
from recommender.spec import load_spec
from recommender.store.results import ResultStore
from tests.integration.test_cli_run import recommender

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.shares_host]

SPEC = """
name: gate
model: {source: bert, architecture: {layers: 1, hidden: 32, heads: 2, intermediate: 64}}
payload: {sequence_length: 16}
variants: {optimizations: [pt, onnx], dynamic_batching: [false], instance_counts: [1], max_batch_sizes: [4]}
traffic: {warmup_seconds: 1, phases: [{initial_users: 1, duration_seconds: 3}]}
"""


def plant_perturbed_torchscript(workdir) -> None:
    import torch

    spec = load_spec(workdir / "gate.yaml")
    artifact = export_model(spec.model, "pt", 16, model_fingerprint(spec), workdir / ".recommender/artifacts")
    module = torch.jit.load(str(artifact.path))
    torch.manual_seed(1)
    with torch.no_grad():
        for parameter in module.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    module.save(str(artifact.path))


def test_a_perturbed_artifact_is_incorrect_excluded_and_not_exported(tmp_path) -> None:
    (tmp_path / "gate.yaml").write_text(SPEC)
    plant_perturbed_torchscript(tmp_path)
    done = recommender(tmp_path, "run", "gate.yaml")
    assert done.returncode == 0, done.stdout + done.stderr

    store = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}")
    results = {r.name: r for r in store.results("gate")}
    broken, good = results["pt-nodb-ig1-mbs4"], results["onnx-nodb-ig1-mbs4"]
    assert good.status == "ok", good.reason
    assert good.correctness["passed"] and good.correctness["tolerance"] == {
        "atol": 1e-4,
        "rtol": 1e-3,
        "min_cosine": 0.9999,
    }
    assert good.correctness["reference"]["library"] == "torch"
    assert {f["case"] for f in good.correctness["figures"]} >= {
        "shortest (one token)",
        "longest (16 tokens)",
        "full batch (4 rows)",
    }
    assert max(f["max_abs_error"] for f in good.correctness["figures"]) < 1e-4

    assert broken.status == "incorrect" and broken.reason.startswith("max abs error")
    assert "> atol 0.0001" in broken.reason and not broken.correctness["passed"]
    assert broken.headline is None and store.window_records(broken.run_id) == []  # not loaded

    ranked = recommender(tmp_path, "rank", "gate")
    assert "incorrect: max abs error" in ranked.stdout, ranked.stdout
    report = recommender(tmp_path, "report", "gate", "--format", "md")
    assert "outputs match the reference" in report.stdout and "incorrect: max abs error" in report.stdout, report.stdout
    refused = recommender(tmp_path, "export", "gate", "--rank", "2", "--out", str(tmp_path / "out"))
    assert refused.returncode == 2, refused.stdout + refused.stderr


def test_an_openvino_candidate_passes_the_gate(tmp_path) -> None:
    """OpenVINO compiles the ONNX export: its outputs must match the PyTorch reference within the fp32 tolerances."""
    pytest.importorskip("openvino", reason="the openvino optimization needs `python3 -m pip install openvino`")
    (tmp_path / "gate.yaml").write_text(SPEC.replace("optimizations: [pt, onnx]", "optimizations: [openvino]"))
    done = recommender(tmp_path, "run", "gate.yaml")
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = ResultStore.open(f"sqlite:///{tmp_path / '.recommender/results.db'}").results("gate")
    assert (result.name, result.status) == ("openvino-nodb-ig1-mbs4", "ok"), result.reason
    assert result.correctness["passed"] and result.correctness["tolerance"]["atol"] == 1e-4
    assert max(f["max_abs_error"] for f in result.correctness["figures"]) < 1e-4
