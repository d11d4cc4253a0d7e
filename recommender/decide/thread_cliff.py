"""llama.cpp's threads cliff, said in the report: a llamacpp candidate whose threads are more than its host can give.

llama.cpp's threads meet at a barrier after every operation of every step and spin while they wait; when they and the
load generator (one core of its own on a shared host: candidate_run.py) need more cores than the host has, one thread
descheduled stalls all of them, and throughput collapses rather than degrades (on a shared 2-core host `-t 2` served
about 17 output tokens/s where `-t 1` served about 700). Two signs, either one enough:

- oversubscribed: threads + the load generator's core > the cores the run recorded (its hardware's cpu_cores);
- a measured collapse: output tokens/s below COLLAPSE times that of the same settings with fewer threads.

A candidate adaptive search pruned after its probe counts too, on its probe's figures (said so): a candidate on the
cliff is the first one the search prunes, and the report must still say why.

    cliff_notes(results) -> ["llama.cpp threads cliff: llamacpp-f32-np1-b2048-ub512-t2: ...", ...]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from recommender.candidates import LLAMACPP, CandidateResult, RunStatus
from recommender.spec.llamacpp import LlamaCppSettings

LOAD_GENERATOR_CORES = 1  # the core the load generator keeps on the serving host (candidate_run.py: reserved)
COLLAPSE = 0.5  # below half the output tokens/s of the same settings with fewer threads: a collapse, not noise


@dataclass(frozen=True)
class _Measured:
    name: str
    settings: LlamaCppSettings
    cores: int | None
    output_tps: float | None
    probed: bool  # pruned after its probe: its figures are the probe's


def cliff_notes(results: Sequence[CandidateResult]) -> list[str]:
    """One note per llamacpp candidate on the cliff: why, with the figures that show it."""
    measured = [m for m in map(_measured, results) if m is not None]
    notes = []
    for one in measured:
        why = []
        if one.settings.threads is None:  # llama-server's own threads (the default candidate): not judged
            continue
        if one.cores is not None and one.settings.threads + LOAD_GENERATOR_CORES > one.cores:
            why.append(
                f"-t {one.settings.threads} and the load generator's core need "
                f"{one.settings.threads + LOAD_GENERATOR_CORES} cores and this host has {one.cores}"
            )
        fewer = _best_with_fewer_threads(one, measured)
        if (
            fewer is not None
            and one.output_tps is not None
            and fewer.output_tps is not None
            and one.output_tps < COLLAPSE * fewer.output_tps
        ):
            why.append(
                f"it served {one.output_tps:.0f} output tokens/s{' in its probe' if one.probed else ''} where "
                f"{fewer.name} (-t {fewer.settings.threads}) served {fewer.output_tps:.0f}"
                f"{' in its probe' if fewer.probed else ''}"
            )
        if why:
            notes.append(
                f"llama.cpp threads cliff: {one.name}: {'; '.join(why)}. Its threads spin at a barrier after every "
                "operation, so one thread without a core stalls every step: use fewer threads than the host's cores "
                "less the load generator's"
            )
    return notes


def _measured(result: CandidateResult) -> _Measured | None:
    if result.config.get("optimization") != LLAMACPP or result.status not in (RunStatus.OK, RunStatus.PRUNED):
        return None
    settings = LlamaCppSettings.from_engine(result.config["engine"])
    cores = (result.hardware or {}).get("cpu_cores")
    generation = result.headline.generation if result.headline is not None else None
    tps = generation.value("output_tps") if generation is not None else None
    probed = result.status == RunStatus.PRUNED
    return _Measured(result.name, settings, cores if isinstance(cores, int) else None, tps, probed)


def _best_with_fewer_threads(one: _Measured, measured: Sequence[_Measured]) -> _Measured | None:
    """The fastest candidate with the same settings but fewer threads (None: there is none measured)."""
    same = replace(one.settings, threads=0)
    fewer = [
        other
        for other in measured
        if replace(other.settings, threads=0) == same
        and other.settings.threads is not None
        and one.settings.threads is not None
        and other.settings.threads < one.settings.threads
        and other.output_tps is not None
    ]
    return max(fewer, key=lambda other: other.output_tps or 0.0, default=None)
