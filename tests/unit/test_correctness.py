"""The correctness gate's pure rules: figures, tolerance defaults and verdicts, check cases, answers, stored
summaries."""

from __future__ import annotations

import math

import pytest

from recommender.correctness.cases import check_cases
from recommender.correctness.figures import (
    Tolerance,
    compare,
    cosine,
    default_tolerance,
    describe,
    tolerance_of,
    verdict,
)
from recommender.correctness.gate import check_outputs, judged_alike, served_outputs
from recommender.spec import ExperimentSpec, PayloadSpec
from recommender.targets.wire import KSERVE

FP32 = Tolerance(1e-4, 1e-3, 0.9999)


def test_identical_outputs_have_no_error_and_pass() -> None:
    f = compare("a", "embedding", [[0.6, 0.8]], [[0.6, 0.8]], FP32)
    assert (f.max_abs_error, f.max_rel_error, f.min_cosine) == (0.0, 0.0, pytest.approx(1.0))
    assert verdict([f], FP32) is None


def test_an_error_above_atol_plus_rtol_is_named_with_its_figures() -> None:
    f = compare("shortest", "embedding", [[0.91, 0.8]], [[0.6, 0.8]], FP32)
    assert f.max_abs_error == pytest.approx(0.31) and f.max_rel_error == pytest.approx(0.31 / 0.6)
    reason = verdict([f], FP32)
    assert reason.startswith("max abs error 0.31 > atol 0.0001 + rtol 0.001 x |reference|")
    assert "on output embedding for input shortest" in reason and "cosine" in reason


@pytest.mark.parametrize("served, ok", [([[1.0 + 5e-4]], True), ([[1.0 + 2e-3]], False)])
def test_rtol_scales_with_the_reference(served, ok) -> None:
    assert (verdict([compare("c", "o", served, [[1.0]], FP32)], FP32) is None) is ok


def test_cosine_alone_can_fail_and_scalars_have_none() -> None:
    loose = Tolerance(1.0, 1.0, 0.9999)
    assert "cosine" in verdict([compare("c", "o", [[1.0, 0.0]], [[0.9, 0.1]], loose)], loose)
    assert compare("c", "o", [[1.0]], [[1.0]], loose).min_cosine is None


def test_non_finite_outputs_and_other_shapes_are_incorrect() -> None:
    assert math.isinf(compare("c", "o", [[math.nan, 1.0]], [[0.0, 1.0]], FP32).max_abs_error)
    assert cosine([math.inf, 0.0], [1.0, 0.0]) == 0.0 and cosine([0.0], [0.0]) == 1.0
    with pytest.raises(ValueError, match="shape"):
        compare("c", "o", [[1.0, 2.0]], [[1.0]], FP32)


def test_defaults_per_precision_and_given_values_win() -> None:
    assert default_tolerance("fp32") == FP32 and default_tolerance("fp16") == Tolerance(1e-2, 1e-2, 0.999)
    assert tolerance_of({"atol": 0.5, "rtol": None}, "fp16") == Tolerance(0.5, 1e-2, 0.999)


def test_more_violations_are_counted() -> None:
    figures = [compare(f"case {i}", "o", [[2.0]], [[1.0]], FP32) for i in range(4)]
    assert verdict(figures, FP32).endswith("(and 2 more)")


def test_check_cases_cover_samples_shortest_longest_and_a_full_batch() -> None:
    payload = PayloadSpec(sequence_length=8, texts=["hello world", "a b c d e f g h i j", "a b"])
    cases = {c.name: c for c in check_cases(payload, max_batch_size=3)}
    assert list(cases) == [
        "sample text 1",
        "sample text 2",
        "shortest (one token)",
        "longest (8 tokens)",
        "full batch (3 rows)",
    ]
    assert cases["shortest (one token)"].mask == [[1] + [0] * 7]
    assert cases["longest (8 tokens)"].mask == [[1] * 8]
    body = cases["full batch (3 rows)"].body()
    assert body["inputs"][0]["shape"] == [3, 8] and len(body["inputs"][0]["data"]) == 24
    assert "full batch" not in "".join(c.name for c in check_cases(payload, max_batch_size=1))


def test_the_gate_checks_the_shortest_median_and_longest_request_at_their_padding() -> None:
    """Requests of 3 to 12 tokens: the gate sends the shortest, the median and the longest (it sent every sample
    text at the one padded length), each padded as the candidate's load is padded."""
    texts = ["a b c", "a b c d e f g h i j", "a", "a b", "a b c d"]  # 5, 12, 3, 4 and 6 tokens
    payload = PayloadSpec(texts=texts)
    lengths = {name: sum(c.mask[0]) for name, c in ((c.name, c) for c in check_cases(payload, 1))}
    assert lengths == {
        "sample text 1": 5,  # the median of 3, 4, 5, 6, 12
        "sample text 2": 12,  # the longest
        "sample text 3": 3,  # the shortest
        "shortest (one token)": 1,
        "longest (12 tokens)": 12,
    }
    widths = {p: {c.name: len(c.ids[0]) for c in check_cases(payload, 4, p)} for p in ("max", "buckets", "none")}
    assert set(widths["max"].values()) == {12}
    assert widths["none"] == lengths | {"full batch (4 rows)": 12}
    assert widths["buckets"]["sample text 3"] == 4 and widths["buckets"]["sample text 1"] == 8
    assert widths["buckets"]["sample text 2"] == 12  # the bucket of 16 is capped at the payload's max length
    batch = next(c for c in check_cases(payload, 4, "none") if c.name == "full batch (4 rows)")
    assert [sum(row) for row in batch.mask] == [5, 12, 3, 1]  # rows of their own lengths, padded to the longest


def test_served_outputs_are_rows_of_the_batch() -> None:
    answer = {"outputs": [{"name": "embedding", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]}]}
    assert served_outputs(answer) == {"embedding": [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]}


class Echo:
    """A fake endpoint answering every request with rows read from a file of expected outputs (shifted by `error`)."""

    wire = KSERVE
    model_name = "model"

    def __init__(self, reference: dict, error: float) -> None:
        self.reference, self.error = reference, error

    def probe(self, body: dict, timeout_s: float = 120.0) -> dict:
        rows = body["inputs"][0]["shape"][0]
        return {
            "outputs": [
                {"name": "embedding", "shape": [rows, 2], "datatype": "FP32", "data": [0.6 + self.error, 0.8] * rows}
            ]
        }


@pytest.mark.parametrize("error, passed", [(0.0, True), (0.3, False)])
def test_a_reference_outputs_file_checks_the_cases_it_names(tmp_path, error, passed) -> None:
    (tmp_path / "expected.json").write_text('{"sample text 1": {"embedding": [[0.6, 0.8]]}}')
    spec = ExperimentSpec(name="x", correctness={"reference_outputs": tmp_path / "expected.json"})
    result = check_outputs(Echo({}, error), spec, max_batch_size=4)
    assert result.passed is passed and len(result.figures) == 1
    assert "full batch (4 rows)" in result.unchecked_cases and result.reference["kind"] == "reference outputs file"
    assert describe(result.to_dict()).startswith("outputs match" if passed else "outputs differ")


def test_off_is_said_and_a_changed_gate_is_not_reused() -> None:
    off = ExperimentSpec(name="x", correctness="off")
    stored = check_outputs(Echo({}, 0.0), off, 1).to_dict()
    assert describe(stored) == "correctness not checked (correctness: off)"
    assert judged_alike(stored, off) and not judged_alike(stored, ExperimentSpec(name="x"))
    assert not judged_alike({"checked": True, "tolerance": {"atol": 1.0}}, ExperimentSpec(name="x"))


def test_a_bare_yaml_off_turns_the_gate_off(tmp_path) -> None:
    from recommender.spec import load_spec

    (tmp_path / "e.yaml").write_text("name: e\ncorrectness: off\n")
    assert load_spec(tmp_path / "e.yaml").correctness == "off"


def test_the_reason_quotes_the_failing_element_not_a_larger_error_that_passed() -> None:
    """Element 0: error 0.05 on a reference of 100 (allowed 0.1001: within); element 1: error 0.01 on a reference of
    0.5 (allowed 0.0006: out). The reason names element 1's figures, not the larger 0.05."""
    f = compare("case", "embedding", [[100.05, 0.51]], [[100.0, 0.5]], FP32)
    reason = verdict([f], FP32)
    assert reason is not None and reason.startswith("abs error 0.01 > atol 0.0001 + rtol 0.001 x |reference| = 0.0006")
    assert "served 0.51 vs reference 0.5" in reason and "max abs error 0.05 is within its own tolerance" in reason


def test_the_reference_is_built_once_per_model_and_each_case_run_once(tmp_path, monkeypatch) -> None:
    """Every candidate of a run is checked against the same reference: the model is loaded once and each case runs
    once in the process, whichever candidate asks (issue 24 item 3)."""
    import torch

    from recommender.correctness import reference as reference_module
    from recommender.correctness.cases import Case
    from recommender.spec import ModelSpec
    from tests.unit.tiny_model import save_pooling_model

    monkeypatch.setattr(reference_module, "_KEPT", {})
    loads: list[str] = []
    calls: list[str] = []
    real_load = torch.jit.load

    class Counted:
        def __init__(self, module) -> None:
            self.module = module

        def eval(self):
            return self

        def __call__(self, *inputs):
            calls.append("run")
            return self.module(*inputs)

    def counting_load(path, *args, **kwargs):
        loads.append(str(path))
        return Counted(real_load(path, *args, **kwargs))

    monkeypatch.setattr(torch.jit, "load", counting_load)
    model = ModelSpec(source="torchscript", path=save_pooling_model(tmp_path / "a.pt"))
    case = Case("one", [[3, 7, 11]], [[1, 1, 1]])
    first = reference_module.reference_for(model, None).outputs(case)
    again = reference_module.reference_for(model, None).outputs(case)
    assert first is not None and first == again and (len(loads), len(calls)) == (1, 1)
    other = ModelSpec(source="torchscript", path=save_pooling_model(tmp_path / "b.pt", seed=1))
    assert reference_module.reference_for(other, None).outputs(case) != first  # another model: its own reference
    assert (len(loads), len(calls)) == (2, 2)
