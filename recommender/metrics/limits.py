"""The limits a decision is taken under: latency percentile and threshold, largest error rate, and SLO terms.

Today's latency threshold is one term (end-to-end, `percentile`, `threshold_ms`); a generative experiment's `slo:`
adds terms (`SloTerm`: TTFT, ITL or end-to-end at a percentile, with a threshold in ms). A level meets the limits when
every term's figure and the error rate are within them (metrics/levels.py); goodput counts the requests whose own
figures are within every term's threshold (metrics/generation.py).

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
class SloTerm:
    """One SLO term: a request figure (`ttft`, `itl`, `e2e`) at a percentile within a threshold (ms)."""

    metric: str
    percentile: str
    threshold_ms: float

    @property
    def label(self) -> str:
        return f"{self.metric.upper()} {self.percentile}"


@dataclass(frozen=True)
class Limits:
    """Latency percentile and threshold (ms), largest error rate (a fraction), SLO terms; defaults are the experiment
    file's."""

    percentile: str = DEFAULT_PERCENTILE
    threshold_ms: float = 500.0
    max_error_rate: float = 0.01
    slo: tuple[SloTerm, ...] = ()

    @classmethod
    def from_spec(cls, spec: ExperimentSpec) -> Limits:
        """The experiment file's limits (`latency_threshold`, `max_error_rate` and `slo`)."""
        threshold = spec.latency_threshold
        slo = spec.slo.terms() if spec.slo is not None else ()
        return cls(threshold.percentile, threshold.ms, spec.max_error_rate, tuple(SloTerm(*t) for t in slo))

    @property
    def terms(self) -> tuple[SloTerm, ...]:
        """Every latency term a level and a request are judged by: the latency threshold (end-to-end), then the SLO."""
        return (SloTerm("e2e", self.percentile, self.threshold_ms), *self.slo)

    def slo_text(self) -> str:
        """'TTFT p95 <= 500 ms, ITL p95 <= 50 ms': the SLO terms ('' without)."""
        return ", ".join(f"{term.label} <= {term.threshold_ms:g} ms" for term in self.slo)

    def within(self) -> str:
        """'p95 <= 500 ms, TTFT p95 <= 1000 ms, ITL p95 <= 100 ms': every latency term, the threshold's first."""
        return ", ".join(filter(None, (f"{self.percentile} <= {self.threshold_ms:g} ms", self.slo_text())))

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
        """Plain JSON-ready data; `slo` only when there are terms (the stored shape of limits without them)."""
        data = dataclasses.asdict(self)
        data["slo"] = [dataclasses.asdict(term) for term in self.slo]
        return data if self.slo else {name: value for name, value in data.items() if name != "slo"}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> Limits | None:
        if not data:
            return None
        slo = tuple(SloTerm(**term) for term in data.get("slo") or ())
        return cls(**{name: value for name, value in data.items() if name != "slo"}, slo=slo)


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
