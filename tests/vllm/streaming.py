"""This tier's own small streaming client (until the load child's generative wire drives the tier): one streamed
request, read chunk by chunk (server-sent events), its chunks' arrival times, finish, [DONE] and `usage` recorded; a
batch of them as a RequestLog with the generation columns (metrics/records.py)."""

from __future__ import annotations

import http.client
import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from urllib.parse import urlsplit

import numpy as np

from recommender.metrics.records import RequestLog


@dataclass
class Streamed:
    """One streamed answer as it came."""

    status: int
    sent: float  # seconds since the batch began
    chunk_us: list[int] = field(default_factory=list)  # every content chunk's arrival, us from the send
    finish_reason: str | None = None
    done: bool = False  # `data: [DONE]` came after the finish
    usage: dict = field(default_factory=dict)
    text: str = ""
    end_us: int = 0


def stream(base: str, path: str, body: dict, began: float = 0.0, timeout_s: float = 120.0) -> Streamed:
    """POST `body` to `base` + `path` and read its event stream to the end."""
    url = urlsplit(base)
    connection = http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s)
    start = time.perf_counter()
    try:
        connection.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        response = connection.getresponse()
        streamed = Streamed(response.status, start - began)
        for raw in response:
            line = raw.decode().strip()
            if not line.startswith("data:"):
                continue
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                streamed.done = streamed.finish_reason is not None
                break
            _read_event(json.loads(data), streamed, int((time.perf_counter() - start) * 1e6))
        streamed.end_us = int((time.perf_counter() - start) * 1e6)
        return streamed
    finally:
        connection.close()


def _read_event(event: dict, streamed: Streamed, now_us: int) -> None:
    if event.get("usage"):
        streamed.usage = event["usage"]
    for choice in event.get("choices") or []:
        piece = (choice.get("delta") or {}).get("content") or choice.get("text") or ""
        if piece:
            streamed.chunk_us.append(now_us)
            streamed.text += piece
        if choice.get("finish_reason"):
            streamed.finish_reason = choice["finish_reason"]


def run_batch(base: str, path: str, bodies: list[dict], concurrency: int) -> list[Streamed]:
    """Every body streamed, `concurrency` at a time, in order."""
    began = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        return list(pool.map(lambda body: stream(base, path, body, began), bodies))


def request_log(answers: list[Streamed]) -> RequestLog:
    """The answers as the request log's rows, token counts from the server's `usage`."""
    counts = [len(a.chunk_us) for a in answers]
    return RequestLog(
        t_s=np.array([a.sent for a in answers]),
        latency_us=np.array([a.end_us for a in answers]),
        ok=np.array([a.status == 200 and a.done for a in answers]),
        users=np.ones(len(answers)),
        ttft_us=np.array([a.chunk_us[0] if a.chunk_us else -1 for a in answers]),
        input_tokens=np.array([a.usage.get("prompt_tokens", -1) for a in answers]),
        output_tokens=np.array([a.usage.get("completion_tokens", -1) for a in answers]),
        tokens_counted=np.zeros(len(answers), dtype=bool),
        finished=np.array([a.done for a in answers]),
        chunk_start=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
        chunk_count=np.array(counts),
        chunk_us=np.array([t for a in answers for t in a.chunk_us], dtype=np.int64),
    )
