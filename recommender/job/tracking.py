"""`tracking.mlflow` in the experiment file: the experiment sent to MLflow after each candidate and at the end (as
`recommender export EXP --mlflow URI` sends it; every send updates the same runs). A tracking server that fails is
said once and left alone for the rest of the run: it never fails a candidate or the job."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from recommender.errors import RecommenderError
from recommender.review import recommend_from_store
from recommender.store.results import ResultStore
from recommender.tracking.export import export_experiment


@dataclass
class Tracker:
    uri: str | None  # None: the file asks for no tracking
    store: ResultStore
    experiment: str
    off_because: str | None = None  # the first failure's message: nothing more is sent in this run
    lock: threading.Lock = field(default_factory=threading.Lock)  # candidates finish on several threads

    def send(self) -> str | None:
        """Every stored candidate to the tracking server; the note to show when this send failed (once per run)."""
        if self.uri is None or self.off_because is not None:
            return None
        with self.lock:
            try:
                rec, _, results = recommend_from_store(self.store, self.experiment)
                export_experiment(self.uri, rec, results, self.store.window_records)
            except RecommenderError as error:
                self.off_because = error.message
                return f"MLflow tracking stopped for this run: {error.message}"
        return None
