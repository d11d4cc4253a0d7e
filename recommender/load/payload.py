"""Request payloads: texts tokenized with the packaged bert-uncased tokenizer, padded as a candidate asks (its
`padding`), as KServe v2 JSON bodies.

    request_token_ids(payload)          the unpadded token ids of every request, in order (the seam)
    max_length(payload)                 the fixed length `padding: max` pads to
    padded_lengths(lengths, padding, L) each request's length on the wire under one padding
    inference_bodies(payload, padding)  one body per request
"""

from __future__ import annotations

import statistics
from functools import lru_cache
from typing import get_args

from recommender.files.payload_file import PayloadRequest
from recommender.load.payload_source import payload_requests
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import PayloadSpec
from recommender.spec.base import Padding

# The longest sequence the packaged encoders take (BERT's and MiniLM's 512 position embeddings): the truncation cap of
# a payload that sets no sequence_length.
MODEL_MAX_TOKENS = 512
PADDINGS: tuple[str, ...] = get_args(Padding)


@lru_cache(maxsize=1)
def _tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))


def token_ids(text: str, max_length: int) -> list[int]:
    """Token ids of one text (with [CLS] and [SEP]), truncated to at most `max_length`, unpadded."""
    tokenizer = _tokenizer()
    tokenizer.enable_truncation(max_length=max_length)
    tokenizer.no_padding()
    return list(tokenizer.encode(text).ids)


def tokenize(text: str, sequence_length: int) -> tuple[list[int], list[int]]:
    """Token ids and attention mask of one text, truncated or padded (id 0) to exactly `sequence_length`."""
    return pad_row(token_ids(text, sequence_length), sequence_length)


def pad_row(ids: list[int], length: int) -> tuple[list[int], list[int]]:
    """Token ids padded (id 0) to `length`, with their attention mask (1 for a token, 0 for padding)."""
    pad = length - len(ids)
    if pad < 0:
        raise ValueError(f"a row of {len(ids)} tokens cannot be padded to {length}")
    return ids + [0] * pad, [1] * len(ids) + [0] * pad


def truncation_cap(payload: PayloadSpec) -> int:
    """The most tokens a request carries: `sequence_length` where set, else the encoder's MODEL_MAX_TOKENS."""
    return payload.sequence_length or MODEL_MAX_TOKENS


def request_token_ids(payload: PayloadSpec) -> list[list[int]]:
    """The token ids of every request of the payload, in order, unpadded (truncated at `truncation_cap`).

    The one seam between where requests come from (the texts, or the user's file: load/payload_source.py) and how
    they are sent (padding, batching): what sends or checks requests starts from these rows. A request the user gave
    as token ids is sent as given (the loader refused rows longer than `sequence_length`).
    """
    return [list(ids) for ids in _token_rows(payload_requests(payload), truncation_cap(payload))]


@lru_cache(maxsize=8)
def _token_rows(requests: tuple[PayloadRequest, ...], cap: int) -> tuple[tuple[int, ...], ...]:
    """The rows of one payload's requests, tokenized once per process (bodies, padded lengths and gate cases all read
    them): keyed by the requests themselves (payload_requests reads a file again once it changed). A request the user
    gave as token ids is sent as given."""
    return tuple(
        request.input_ids if request.input_ids is not None else tuple(token_ids(request.content() or "", cap))
        for request in requests
    )


def request_texts(payload: PayloadSpec) -> list[str]:
    """Every request as text, decoded from its token ids (for a server that tokenizes itself: it is sent the same
    tokens, truncated where Triton's requests are, re-tokenizing to the same ids)."""
    tokenizer = _tokenizer()
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in request_token_ids(payload)]


def request_lengths(payload: PayloadSpec) -> list[int]:
    """The unpadded length (tokens) of every request, in order."""
    return [len(ids) for ids in request_token_ids(payload)]


def max_length(payload: PayloadSpec) -> int:
    """The length `padding: max` pads every request to: `sequence_length` where the payload sets it (a fixed-shape
    deployment's length), else the payload's longest request."""
    return payload.sequence_length or max(request_lengths(payload))


def padded_length(length: int, padding: str, maximum: int) -> int:
    """A request of `length` tokens on the wire: `max` -> `maximum`; `buckets` -> the next power of two, at most
    `maximum`; `none` -> its own length."""
    if padding == "max":
        return maximum
    if padding == "buckets":
        return min(1 << max(0, length - 1).bit_length(), maximum)
    if padding == "none":
        return length
    raise ValueError(f"unknown padding {padding!r}; use one of {', '.join(PADDINGS)}")


def padded_lengths(payload: PayloadSpec, padding: str) -> list[int]:
    """Every request's length on the wire under `padding`, in order."""
    maximum = max_length(payload)
    return [padded_length(n, padding, maximum) for n in request_lengths(payload)]


def length_profile(lengths: list[int]) -> tuple[int, int, int]:
    """(shortest, median, longest) of some lengths: what the correctness gate checks at, and a TensorRT
    optimization profile's min / opt / max."""
    if not lengths:
        raise ValueError("no lengths")
    return min(lengths), int(statistics.median_low(lengths)), max(lengths)


def inference_bodies(payload: PayloadSpec, padding: str = "max") -> list[dict]:
    """One KServe v2 inference request body (batch of 1) per request of the payload, padded as `padding` says."""
    maximum = max_length(payload)
    bodies = []
    for ids in request_token_ids(payload):
        padded, mask = pad_row(ids, padded_length(len(ids), padding, maximum))
        bodies.append(batch_body([padded], [mask]))
    return bodies


def batch_body(ids_rows: list[list[int]], mask_rows: list[list[int]]) -> dict:
    """One KServe v2 request of several rows (a batch), each row padded to the same length."""
    shape = [len(ids_rows), len(ids_rows[0])]
    flat = lambda rows: [value for row in rows for value in row]
    return {
        "inputs": [
            {"name": "input_ids", "shape": shape, "datatype": "INT64", "data": flat(ids_rows)},
            {"name": "attention_mask", "shape": shape, "datatype": "INT64", "data": flat(mask_rows)},
        ]
    }
