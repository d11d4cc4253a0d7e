"""How requests and answers look on the wire: Triton's KServe v2 JSON, or the OpenAI embeddings API.

Pure strings and plain data, no imports beyond kserve.py: the Locust child gets the path and the answer's key from
its config, the correctness gate and the job build their request bodies here.

    KSERVE.path(model)  -> /v2/models/<model>/infer        (token ids in, "outputs" out)
    openai(prefix).path -> <prefix>/embeddings              (texts in, "data": [{"embedding": [...]}, ...] out)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from recommender.targets import kserve

OPENAI = "openai"
EMBEDDINGS = "/embeddings"


@dataclass(frozen=True)
class Wire:
    """One request format: its name, the path a request is POSTed to, and the key every good answer holds."""

    name: str
    answer_key: str
    prefix: str = ""  # OpenAI: the server's URL prefix (e.g. /v1), "" when the routes are at the root

    def path(self, model: str) -> str:
        return f"{self.prefix}{EMBEDDINGS}" if self.name == OPENAI else kserve.infer_path(model)

    @property
    def takes_text(self) -> bool:
        """The server tokenizes: requests carry the payload's texts, not token ids."""
        return self.name == OPENAI


KSERVE = Wire("kserve", "outputs")


def openai(prefix: str = "") -> Wire:
    return Wire(OPENAI, "data", prefix.rstrip("/"))


def openai_body(model: str, texts: Sequence[str]) -> dict[str, Any]:
    """One embeddings request: `input` is always a list (one row per text)."""
    return {"model": model, "input": list(texts)}


def embeddings_of(answer: Any, rows: int) -> list[list[float]]:
    """The embeddings of an OpenAI answer in input order; ValueError saying what is wrong with the answer."""
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list) or len(data) != rows:
        found = f"{len(data)} rows" if isinstance(data, list) else f"no `data` list ({str(answer)[:200]})"
        raise ValueError(f"expected `data` with {rows} embeddings, got {found}")
    ordered = sorted(data, key=lambda item: item.get("index", 0) if isinstance(item, dict) else 0)
    vectors = [item.get("embedding") if isinstance(item, dict) else None for item in ordered]
    if not all(isinstance(v, list) and v and all(isinstance(x, int | float) for x in v) for v in vectors):
        raise ValueError("a row of `data` has no `embedding` list of numbers (base64 answers are not read)")
    return [[float(x) for x in v] for v in vectors]  # type: ignore[union-attr]
