"""The limits a decision is taken under: latency percentile and threshold, largest error rate.

One frozen record for every place that carries them: the measurement's stop conditions (the limits at measure
time), the decision at read time (the experiment file's, or the CLI's / dashboard's overrides), the ranking's
exclusions. Built from an experiment spec (`from_spec`, read duck-typed: spec never imports metrics) and changed
only by `override`, which validates the new values as the experiment file would.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from recommender.errors import SpecError
from recommender.vocabulary import DEFAULT_PERCENTILE, PERCENTILE_NAMES

if TYPE_CHECKING:
    from recommender.spec import ExperimentSpec


@dataclass(frozen=True)
class Limits:
    """Latency percentile and threshold (ms), largest error rate (a fraction); defaults are the experiment file's."""

    percentile: str = DEFAULT_PERCENTILE
    threshold_ms: float = 500.0
    max_error_rate: float = 0.01

    @classmethod
    def from_spec(cls, spec: ExperimentSpec) -> Limits:
        """The experiment file's limits (`latency_threshold` and `max_error_rate`)."""
        threshold = spec.latency_threshold
        return cls(threshold.percentile, threshold.ms, spec.max_error_rate)

    def override(
        self, threshold_ms: float | None = None, percentile: str | None = None, max_error_rate: float | None = None
    ) -> Limits:
        """These limits with the given values in place (None keeps the current one); SpecError for a bad value."""
        changed = {
            name: value
            for name, value in (
                ("threshold_ms", threshold_ms),
                ("percentile", percentile),
                ("max_error_rate", max_error_rate),
            )
            if value is not None
        }
        return dataclasses.replace(self, **_checked(changed)) if changed else self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Limits | None:
        return cls(**data) if data else None


def _checked(values: dict[str, Any]) -> dict[str, Any]:
    """The values of an override, checked as the experiment file's fields are (SpecError naming the field)."""
    if "percentile" in values and values["percentile"] not in PERCENTILE_NAMES:
        raise SpecError(
            f"latency percentile must be one of {', '.join(PERCENTILE_NAMES)}, got {values['percentile']!r}"
        )
    if "threshold_ms" in values and not float(values["threshold_ms"]) > 0:
        raise SpecError(f"latency threshold must be above 0 ms, got {values['threshold_ms']!r}")
    if "max_error_rate" in values and not 0 <= float(values["max_error_rate"]) <= 1:
        raise SpecError(f"max error rate must be between 0 and 1, got {values['max_error_rate']!r}")
    return {name: value if name == "percentile" else float(value) for name, value in values.items()}
