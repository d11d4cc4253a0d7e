"""Request payloads: sample texts tokenized with the packaged bert-uncased tokenizer, as KServe v2 JSON bodies."""

from __future__ import annotations

from functools import lru_cache

from recommender.load.payload_source import payload_requests
from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import PayloadSpec


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
    ids = token_ids(text, sequence_length)
    pad = sequence_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad


def request_token_ids(payload: PayloadSpec) -> list[list[int]]:
    """The token ids of every request of the payload, in order, unpadded (truncated at `sequence_length`).

    The one seam between where requests come from (the texts, or the user's file: load/payload_source.py) and how
    they are sent (padding, batching): what sends or checks requests starts from these rows. A request the user gave
    as token ids is sent as given (the loader refused rows longer than `sequence_length`).
    """
    length = payload.sequence_length
    return [
        list(request.input_ids) if request.input_ids is not None else token_ids(request.text or "", length)
        for request in payload_requests(payload)
    ]


def request_texts(payload: PayloadSpec) -> list[str]:
    """Every request as text, decoded from its token ids (for a server that tokenizes itself: it is sent the same
    tokens, truncated where Triton's requests are, re-tokenizing to the same ids)."""
    tokenizer = _tokenizer()
    return [tokenizer.decode(ids, skip_special_tokens=True) for ids in request_token_ids(payload)]


def inference_bodies(payload: PayloadSpec) -> list[dict]:
    """One KServe v2 inference request body (batch of 1) per sample text."""
    return [_body(*tokenize(text, payload.sequence_length)) for text in payload.texts]


def _body(ids: list[int], mask: list[int]) -> dict:
    return batch_body([ids], [mask])


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
