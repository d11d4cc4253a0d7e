"""A vLLM candidate served at a 16-bit type its CPU does not compute natively, said in the report.

vLLM's `dtype: auto` serves a float32 model at bf16 on a CPU (its log: "Downcasting torch.float32 to
torch.bfloat16"), and the generation gate records the precision served (`correctness.precision`). A CPU without bf16
instructions (x86: AVX512_BF16 or AMX-BF16; Arm: BF16) converts every 16-bit operand to float32 and back, so the
16-bit type that saves memory bandwidth costs arithmetic instead: measured on an AMD EPYC with AVX2 only (docs/
benchmarks.md, "A third run of each strategy, on another CPU"), `dtype: float32` served 2.5x vLLM's `auto` at 8 users
and every `auto` candidate missed the SLOs. fp16 likewise (x86: AVX512_FP16 or AMX-FP16; Arm: FPHP).

The CPU's features are the ones the run recorded with its hardware (hardware.NUMBER_FEATURES): a run stored before
they were, or served where they cannot be read, is not judged. Nothing is refused: the figures are what this host
serves; the note says what to measure next.

    emulated_precision_notes(results) -> ["vLLM served bf16 on AMD EPYC, which has no bf16 instructions ...", ...]
"""

from __future__ import annotations

from collections.abc import Sequence

from recommender.candidates import VLLM, CandidateResult

# the precisions the gate records that a CPU may lack, and the CPU features (hardware.NUMBER_FEATURES) computing them
NATIVE = {"bf16": ("avx512_bf16", "amx_bf16", "bf16"), "fp16": ("avx512_fp16", "amx_fp16", "fphp")}
NAMED = 3  # candidates named in a note; the rest counted


def emulated_precision_notes(results: Sequence[CandidateResult]) -> list[str]:
    """One note per (precision, CPU) whose vLLM candidates were served at a 16-bit type the CPU lacks."""
    found: dict[tuple[str, str, tuple[str, ...]], list[str]] = {}
    for result in results:
        hardware = result.hardware or {}
        precision = (result.correctness or {}).get("precision")
        features = tuple(hardware.get("cpu_features") or ())
        if (
            result.config.get("optimization") != VLLM
            or hardware.get("accelerator") != "cpu"
            or precision not in NATIVE
            or not features
            or set(features) & set(NATIVE[precision])
        ):
            continue
        found.setdefault((precision, str(hardware.get("cpu_model") or "this CPU"), NATIVE[precision]), []).append(
            result.name
        )
    return [_note(precision, cpu, native, names) for (precision, cpu, native), names in found.items()]


def _note(precision: str, cpu: str, native: tuple[str, ...], names: list[str]) -> str:
    listed = ", ".join(names[:NAMED]) + (f" and {len(names) - NAMED} more" if len(names) > NAMED else "")
    which = f"{len(names)} candidate{'s' if len(names) != 1 else ''}"
    return (
        f"vLLM served {precision} on {cpu}, which has no {precision} instructions (none of {', '.join(native)} in "
        f"the flags its runs recorded): {which} ({listed}). Such a CPU converts every {precision} operand to float32 "
        f"and back, so float32 may serve more: measure it beside them with engine_args dtype: [auto, float32]"
    )
