"""Where a payload's requests come from: the experiment's texts (the packaged ones by default) or the user's file
(`payload.file`, read by files/payload_file.py), sampled with `payload.sample` and `payload.seed`.

    payload_requests(payload) -> the requests, in the order requests cycle through them
    payload_fingerprint(payload) -> 16 hex digits of what the requests are (not where they were read from)

The loader (spec/loader.py) already read the file once and refused what is wrong; reading it again here refuses the
same way (the file may have changed since), before the run stores anything.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from recommender.errors import InputError
from recommender.files.payload_file import PayloadRequest, read_payload_file
from recommender.spec import PayloadSpec


def payload_requests(payload: PayloadSpec) -> tuple[PayloadRequest, ...]:
    """Every request of the payload, in order: the file's rows (sampled) when `payload.file` is set, else the texts."""
    if payload.file is None:
        return tuple(PayloadRequest(f"payload.texts[{i}]", text=text) for i, text in enumerate(payload.texts))
    try:
        stat = Path(payload.file).stat()  # a file changed since it was last read is read again
        version = (stat.st_mtime_ns, stat.st_size)
    except OSError:  # gone or unreadable since `validate`: the reader says so in one line (errors are not cached)
        version = (-1, -1)
    return _file_requests(str(payload.file), payload.format, payload.column, payload.sample, payload.seed, *version)


@lru_cache(maxsize=4)
def _file_requests(
    path: str, format: str, column: str | None, sample: int | None, seed: int, _mtime: int, _size: int
) -> tuple[PayloadRequest, ...]:
    requests = read_payload_file(path, format, column)
    if sample is not None and sample > len(requests):
        raise InputError(
            f"{path}: holds {len(requests):,} requests, fewer than payload.sample ({sample:,})",
            hint=f"Set payload.sample to at most {len(requests):,}, or leave it out to send every request.",
        )
    return tuple(sample_requests(requests, sample, seed))


def sample_requests(requests: Sequence[PayloadRequest], size: int | None, seed: int) -> list[PayloadRequest]:
    """`size` requests picked at random with `seed` (the same seed, the same pick), kept in the file's order."""
    if size is None or size >= len(requests):
        return list(requests)
    picked = sorted(random.Random(seed).sample(range(len(requests)), size))
    return [requests[i] for i in picked]


def payload_fingerprint(payload: PayloadSpec) -> str:
    """What the requests are, hashed: the same requests in the same order give the same fingerprint, wherever the
    file lives and whatever its format."""
    canonical = json.dumps([request.canonical() for request in payload_requests(payload)], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
