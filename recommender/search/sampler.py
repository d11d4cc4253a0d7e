"""The model-based sampler for numeric ranges: Optuna's TPE, seeded, as an ask/tell object over candidates.

Each axis of the variant grid is a parameter: ranges (`{range: [1, 8]}`) are integers (log scale when asked), lists
are categorical; a dynamic-batching choice whose `max_queue_delay_microseconds` or `preferred_batch_size` is a range
adds that setting as an integer parameter (conditional on the choice; a preferred size is served as a one-item list,
and one above the candidate's max_batch_size is dropped as in a list, so two proposals can be the same candidate). The
objective is MaxInvocations (maximised); a candidate that met no level, failed or was skipped tells 0. With several
targets, the target is a categorical parameter too. A proposal that repeats a candidate already tried is told its
known value and another is asked for.
"""

from __future__ import annotations

from typing import Any

import optuna

from recommender.candidates import Candidate, expand_candidates
from recommender.spec import DynamicBatching, ExperimentSpec
from recommender.spec.search import IntRange

_AXES = ("optimizations", "precisions", "dynamic_batching", "instance_group_counts", "max_batch_sizes")
_ATTEMPTS = 50  # proposals asked for before the sampler says the space is used up


class Sampler:
    def __init__(self, spec: ExperimentSpec) -> None:
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        sampler = optuna.samplers.TPESampler(
            seed=spec.search.seed, n_startup_trials=min(10, max(2, spec.search.budget.candidates or 10) // 2)
        )
        self.study = optuna.create_study(direction="maximize", sampler=sampler)
        self.spec = spec
        self.trials: dict[int, str] = {}  # trial number -> candidate key, for trials still out
        self.values: dict[str, float] = {}  # candidate key -> its measured value

    def ask(self) -> Candidate | None:
        """The next untried candidate the sampler proposes, or None when it keeps proposing tried ones."""
        for _ in range(_ATTEMPTS):
            trial = self.study.ask()
            candidate = self._candidate(trial)
            if candidate is None:  # e.g. fp16 on an optimization that serves fp32 only
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
            elif candidate.key in self.values:
                self.study.tell(trial, self.values[candidate.key])
            elif candidate.key not in self.trials.values():
                self.trials[trial.number] = candidate.key
                return candidate
            else:
                self.study.tell(trial, state=optuna.trial.TrialState.PRUNED)
        return None

    def tell(self, candidate: Candidate, max_invocations: float | None) -> None:
        number = next(n for n, key in self.trials.items() if key == candidate.key)
        self.values[candidate.key] = max_invocations or 0.0
        self.study.tell(number, self.values[candidate.key])

    def _candidate(self, trial: optuna.trial.Trial) -> Candidate | None:
        grid = self.spec.variants
        # padding is a parameter only when there is a choice (a seeded search without it proposes as it did before)
        axes = (*_AXES, "padding") if len(grid.padding) > 1 else _AXES
        chosen = {axis: [self._suggest(trial, axis, getattr(grid, axis))] for axis in axes}
        variants = grid.model_construct(**{**dict(grid), **chosen})
        found = expand_candidates(self.spec.model_copy(update={"variants": variants}))  # one per target
        if len(found) > 1:  # several targets: where to serve it is a choice too
            return found[trial.suggest_categorical("target", list(range(len(found))))]
        return found[0] if found else None

    @staticmethod
    def _suggest(trial: optuna.trial.Trial, axis: str, values):
        if isinstance(values, IntRange):
            return trial.suggest_int(axis, *values.range, log=values.log)
        index = trial.suggest_categorical(axis, list(range(len(values))))  # by index: dicts are not Optuna choices
        chosen = values[index]
        if isinstance(chosen, DynamicBatching) and chosen.ranged:  # a delay or preferred-size range: a parameter too
            picked: dict[str, Any] = {  # a model_copy update
                name: trial.suggest_int(f"{axis}[{index}].{name}", *within.range, log=within.log)
                for name, within in chosen.ranges.items()
            }
            if "preferred_batch_size" in picked:
                picked["preferred_batch_size"] = [picked["preferred_batch_size"]]
            return chosen.model_copy(update=picked)
        return chosen
