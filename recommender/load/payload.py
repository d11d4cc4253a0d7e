"""Request payloads: sample texts tokenized with the packaged bert-uncased tokenizer, as KServe v2 JSON bodies."""

from __future__ import annotations

from functools import lru_cache

from recommender.modelrepo.model_source import minilm_dir
from recommender.spec import PayloadSpec


@lru_cache(maxsize=1)
def _tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(minilm_dir() / "tokenizer.json"))


def tokenize(text: str, sequence_length: int) -> tuple[list[int], list[int]]:
    """Token ids and attention mask of one text, truncated or padded (id 0) to exactly `sequence_length`."""
    tokenizer = _tokenizer()
    tokenizer.enable_truncation(max_length=sequence_length)
    tokenizer.no_padding()
    ids = tokenizer.encode(text).ids
    pad = sequence_length - len(ids)
    return ids + [0] * pad, [1] * len(ids) + [0] * pad


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
