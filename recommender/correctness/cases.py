"""The inputs the gate sends: every sample text, and edge cases (one token, the full sequence, a full batch)."""

from __future__ import annotations

from dataclasses import dataclass

from recommender.load.payload import batch_body, tokenize
from recommender.spec import PayloadSpec


@dataclass(frozen=True)
class Case:
    """One request of the gate: a name for reports and its rows of token ids and attention masks."""

    name: str
    ids: list[list[int]]
    mask: list[list[int]]
    texts: tuple[str, ...] | None = None  # the texts the rows were tokenized from (None: rows made of tokens)

    def body(self) -> dict:
        return batch_body(self.ids, self.mask)


def check_cases(payload: PayloadSpec, max_batch_size: int) -> list[Case]:
    """Sample texts (one row each), the shortest and longest inputs, and a batch of max_batch_size rows when above 1.

    Rows keep the payload's padded length (the length the load sends, and the only one a fixed-length export takes)."""
    length = payload.sequence_length
    samples = [Case(f"sample text {i + 1}", *_rows([tokenize(text, length)])) for i, text in enumerate(payload.texts)]
    edges = [
        Case("shortest (one token)", *_rows([_one_token(payload)])),
        Case(f"longest ({length} tokens)", *_rows([tokenize(_long_text(payload), length)])),
    ]
    cases = samples + edges
    if max_batch_size > 1:
        singles = [(c.ids[0], c.mask[0]) for c in cases]
        rows = [singles[i % len(singles)] for i in range(max_batch_size)]
        cases.append(Case(f"full batch ({max_batch_size} rows)", *_rows(rows)))
    return cases


def text_cases(payload: PayloadSpec, max_batch_size: int) -> list[Case]:
    """For a server that tokenizes (the OpenAI embeddings API): every sample text, and a batch of max_batch_size
    texts when above 1. Edge cases made of tokens (one token, a truncated sequence) have no text to send; a text
    longer than the payload's sequence length is not sent either (the server would not truncate it as we do)."""
    length = payload.sequence_length
    fitting = [text for text in payload.texts if sum(tokenize(text, length)[1]) < length]
    cases = [Case(f"sample text {i + 1}", *_rows([tokenize(t, length)]), (t,)) for i, t in enumerate(fitting)]
    if max_batch_size > 1 and fitting:
        texts = tuple(fitting[i % len(fitting)] for i in range(max_batch_size))
        cases.append(Case(f"full batch ({max_batch_size} rows)", *_rows([tokenize(t, length) for t in texts]), texts))
    return cases


def _rows(pairs: list[tuple[list[int], list[int]]]) -> tuple[list[list[int]], list[list[int]]]:
    return [ids for ids, _ in pairs], [mask for _, mask in pairs]


def _one_token(payload: PayloadSpec) -> tuple[list[int], list[int]]:
    ids, _ = tokenize(payload.texts[0], payload.sequence_length)
    pad = payload.sequence_length - 1
    return [ids[0]] + [0] * pad, [1] + [0] * pad


def _long_text(payload: PayloadSpec) -> str:
    """The sample texts repeated until they fill the sequence (tokenize truncates the rest)."""
    text = " ".join(payload.texts)
    return " ".join([text] * (payload.sequence_length // max(1, len(text.split())) + 1))
