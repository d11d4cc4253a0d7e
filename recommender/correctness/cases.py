"""The inputs the gate sends: the payload's shortest, median and longest requests, and edge cases (one token, a full
sequence, a full batch of rows of different lengths), each padded as the candidate pads its load."""

from __future__ import annotations

from dataclasses import dataclass

from recommender.load.payload import (
    batch_body,
    length_profile,
    max_length,
    pad_row,
    padded_length,
    request_texts,
    request_token_ids,
    token_ids,
    truncation_cap,
)
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


def check_cases(payload: PayloadSpec, max_batch_size: int, padding: str = "max") -> list[Case]:
    """The shortest, median and longest request of the payload (one row each), one token, a row filling the payload's
    max length, and a batch of max_batch_size rows when above 1 (rows of different lengths, padded to the batch's
    longest, as a client batches them). Rows are padded as `padding` pads the load (max: every row at the payload's
    max length; buckets: to the next power of two; none: its own length)."""
    maximum = max_length(payload)
    rows = request_token_ids(payload)
    cases = [Case(name, *_padded([rows[index]], padding, maximum)) for name, index in _profile(rows)]
    cases += [
        Case("shortest (one token)", *_padded([rows[0][:1]], padding, maximum)),
        Case(f"longest ({maximum} tokens)", *_padded([_filled(payload, maximum)], padding, maximum)),
    ]
    if max_batch_size > 1:
        singles = [_unpadded(case) for case in cases]
        batch = [singles[i % len(singles)] for i in range(max_batch_size)]
        cases.append(Case(f"full batch ({max_batch_size} rows)", *_padded(batch, padding, maximum)))
    return cases


def text_cases(payload: PayloadSpec, max_batch_size: int) -> list[Case]:
    """For a server that tokenizes (the OpenAI embeddings API): the shortest, median and longest request as text,
    and a batch of max_batch_size texts when above 1. Edge cases made of tokens (one token, a truncated sequence)
    have no text to send; a request cut at the payload's truncation cap is not sent either (the server would not
    truncate it as we do)."""
    cap = truncation_cap(payload)
    rows, texts = request_token_ids(payload), request_texts(payload)
    fitting = [(name, i) for name, i in _profile(rows) if len(rows[i]) < cap]
    cases = [Case(name, *_text_rows([texts[i]], cap), (texts[i],)) for name, i in fitting]
    if max_batch_size > 1 and fitting:
        batch = tuple(texts[fitting[i % len(fitting)][1]] for i in range(max_batch_size))
        cases.append(Case(f"full batch ({max_batch_size} rows)", *_text_rows(list(batch), cap), batch))
    return cases


def prompt_cases(lengths: list[int]) -> list[tuple[str, int]]:
    """The generation gate's prompts: (name, index) of the shortest, median and longest prompt by input tokens, named
    `prompt N` (N: its place among the experiment's prompts, from 1)."""
    return [(f"prompt {index + 1}", index) for index in _indices(lengths)]


def _profile(rows: list[list[int]]) -> list[tuple[str, int]]:
    """(name, request index) of the shortest, median and longest request (the first of each length; one case where
    two are the same request), in payload order. Named `sample text N` (N: the request's place in the payload, from
    1), the names a reference outputs file keys its rows by."""
    return [(f"sample text {index + 1}", index) for index in _indices([len(ids) for ids in rows])]


def _indices(lengths: list[int]) -> list[int]:
    """The first index of the shortest, median and longest length (one where two coincide), in order."""
    return sorted({lengths.index(length) for length in length_profile(lengths)})


def _padded(rows: list[list[int]], padding: str, maximum: int) -> tuple[list[list[int]], list[list[int]]]:
    """Rows padded as one request: each row's padded length is `padding`'s, the request's the longest of them."""
    length = max(padded_length(len(ids), padding, maximum) for ids in rows)
    pairs = [pad_row(ids, length) for ids in rows]
    return [ids for ids, _ in pairs], [mask for _, mask in pairs]


def _unpadded(case: Case) -> list[int]:
    return case.ids[0][: sum(case.mask[0])]


def _text_rows(texts: list[str], cap: int) -> tuple[list[list[int]], list[list[int]]]:
    """The rows the reference computes for texts: each tokenized to its own length, padded to the longest."""
    rows = [token_ids(text, cap) for text in texts]
    return _padded(rows, "none", cap)


def _filled(payload: PayloadSpec, length: int) -> list[int]:
    """A row of exactly `length` tokens: the payload's requests repeated ([CLS] first, [SEP] last) and cut there."""
    rows = request_token_ids(payload)
    inner = [token for ids in rows for token in ids[1:-1]] or [ids[0] for ids in rows]
    body = (inner * (length // max(1, len(inner)) + 1))[: length - 2]
    return [rows[0][0], *body, rows[0][-1]] if length >= 2 else rows[0][:length]
