"""Every export takes a dynamic sequence axis (issue 36 item 2): the ONNX file (which OpenVINO also reads) declares
the sequence dynamic, a TorchScript trace is checked at several lengths against the model, and a trace or a user's
file that fixes one length is refused with a BuildError naming the length."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from recommender.errors import BuildError
from recommender.modelrepo.export import check_trace_lengths, export_model
from recommender.spec import ModelSpec

TINY_BERT = ModelSpec(source="bert", architecture={"layers": 1, "hidden": 32, "heads": 2, "vocab_size": 2000})


def inputs(length: int):
    rng = np.random.default_rng(length)
    ids = rng.integers(1000, 2000, (2, length), dtype=np.int64)
    mask = np.ones_like(ids)
    mask[1, length // 2 :] = 0
    return ids, mask


def reference(ids, mask):
    import torch

    from recommender.modelrepo.model_source import load_torch_model

    with torch.no_grad():
        return load_torch_model(TINY_BERT)(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()


def test_the_onnx_export_serves_every_length_of_the_payload(tmp_path: Path) -> None:
    """Exported for requests of 5 to 40 tokens; run at 3, 5, 17 and 40 (it was exported with a fixed sequence and
    onnxruntime refused any other length)."""
    import onnxruntime

    artifact = export_model(TINY_BERT, "onnx", (5, 17, 40), "tiny", tmp_path)
    session = onnxruntime.InferenceSession(str(artifact.path), providers=["CPUExecutionProvider"])
    assert [i.shape[1] for i in session.get_inputs()] == ["sequence", "sequence"]
    for length in (3, 5, 17, 40):
        ids, mask = inputs(length)
        (served,) = session.run(None, {"input_ids": ids, "attention_mask": mask})
        np.testing.assert_allclose(served, reference(ids, mask), atol=1e-5)


def test_the_torchscript_export_serves_every_length(tmp_path: Path) -> None:
    import torch

    artifact = export_model(TINY_BERT, "pt", (5, 17, 40), "tiny", tmp_path)
    module = torch.jit.load(str(artifact.path))
    for length in (3, 40, 64):
        ids, mask = inputs(length)
        with torch.no_grad():
            served = module(torch.from_numpy(ids), torch.from_numpy(mask)).numpy()
        np.testing.assert_allclose(served, reference(ids, mask), atol=1e-5)


class BakesItsLength:
    """Models whose trace records the example's sequence length as a constant (int() of a size)."""

    @staticmethod
    def scaled():
        import torch

        class Scaled(torch.nn.Module):
            def forward(self, input_ids, attention_mask):
                return (input_ids * attention_mask).float().sum(1, keepdim=True) / float(int(input_ids.shape[1]))

        return Scaled()

    @staticmethod
    def positioned():
        import torch

        class Positioned(torch.nn.Module):
            def forward(self, input_ids, attention_mask):
                positions = torch.arange(int(input_ids.shape[1]))
                return (input_ids + positions).float().sum(1, keepdim=True)

        return Positioned()


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (BakesItsLength.scaled, r"differs from the model by .* at sequence length 3 .*baked its example's length in"),
        (BakesItsLength.positioned, r"does not run at sequence length 3"),
    ],
)
def test_a_trace_that_bakes_its_length_in_is_refused(model, message: str) -> None:
    import torch

    module = model()
    example = (torch.ones(2, 16, dtype=torch.int64), torch.ones(2, 16, dtype=torch.int64))
    traced = torch.jit.trace(module, example, check_trace=False)
    with pytest.raises(BuildError, match=message):
        check_trace_lengths(module, traced, [3, 16])
    check_trace_lengths(module, traced, [16])  # at its example's length it agrees


def test_a_users_model_file_with_a_fixed_length_is_refused_naming_the_length(tmp_path: Path) -> None:
    import torch

    path = tmp_path / "fixed.pt"
    module = BakesItsLength.positioned()
    torch.jit.trace(module, (torch.ones(2, 16, dtype=torch.int64),) * 2, check_trace=False).save(str(path))
    with pytest.raises(BuildError, match="could not be run at sequence length 8"):
        export_model(ModelSpec(source="torchscript", path=path), "pt", (8, 12, 16), "fixed", tmp_path / "cache")
    assert export_model(ModelSpec(source="torchscript", path=path), "pt", 16, "ok", tmp_path / "cache").path.is_file()


def test_openvino_compiles_the_export_with_a_dynamic_sequence(tmp_path: Path) -> None:
    """The openvino optimization serves the ONNX export (OpenVINO's ONNX frontend): its shape is dynamic in the
    sequence, and one compiled model answers every length."""
    openvino = pytest.importorskip("openvino")
    artifact = export_model(TINY_BERT, "openvino", (5, 17, 40), "tiny", tmp_path)
    compiled = openvino.Core().compile_model(str(artifact.path), "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    assert all(port.get_partial_shape()[1].is_dynamic for port in compiled.inputs)
    request = compiled.create_infer_request()
    for length in (3, 40):
        ids, mask = inputs(length)
        served = request.infer({"input_ids": ids, "attention_mask": mask})[compiled.outputs[0]]
        np.testing.assert_allclose(served, reference(ids, mask), atol=1e-4)
