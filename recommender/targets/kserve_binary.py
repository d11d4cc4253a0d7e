"""KServe v2's binary tensor extension (Triton's HTTP protocol), the encoding real Triton clients send by default:
a JSON header naming each input with `parameters.binary_data_size` instead of `data`, then the inputs' raw
little-endian bytes in order; `Inference-Header-Content-Length` says where the header ends. The answer stays JSON
(`binary_data_output: false`), so every answer is checked as before (wire.answer_problem).

    binary_request(body) -> (bytes, headers)   # a KServe v2 JSON request body, encoded

Standard library only: the Locust child encodes its bodies with it once, at start.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

HEADER_LENGTH = "Inference-Header-Content-Length"
CONTENT_TYPE = "application/octet-stream"
ENCODINGS = ("json", "binary")
# KServe datatype -> struct format character (little-endian)
_FORMATS = {"INT64": "q", "INT32": "i", "INT16": "h", "INT8": "b", "UINT8": "B", "FP32": "f", "FP64": "d", "BOOL": "?"}


def binary_request(body: Mapping[str, Any]) -> tuple[bytes, dict[str, str]]:
    """The request `body` (KServe v2 JSON: `inputs` with `datatype` and flat `data`) in the binary tensor extension,
    with the headers it needs; ValueError for a body that is not one (an OpenAI body, a datatype without a fixed
    width)."""
    inputs = body.get("inputs")
    if not isinstance(inputs, list) or not inputs:
        raise ValueError(
            "binary tensors need a KServe v2 body with `inputs` (this body has none: a server that "
            "tokenizes takes JSON text)"
        )
    described, raw = [], []
    for tensor in inputs:
        data = _packed(tensor)
        parameters = {**tensor.get("parameters", {}), "binary_data_size": len(data)}
        described.append({k: v for k, v in tensor.items() if k != "data"} | {"parameters": parameters})
        raw.append(data)
    parameters = {**body.get("parameters", {}), "binary_data_output": False}
    header = json.dumps({**body, "inputs": described, "parameters": parameters}).encode()
    return header + b"".join(raw), {HEADER_LENGTH: str(len(header)), "Content-Type": CONTENT_TYPE}


def _packed(tensor: Mapping[str, Any]) -> bytes:
    datatype, data = tensor.get("datatype"), tensor.get("data")
    code = _FORMATS.get(str(datatype))
    if code is None or not isinstance(data, list):
        raise ValueError(
            f"input {tensor.get('name')!r}: datatype {datatype!r} with flat `data` cannot be sent as "
            f"binary tensors (supported: {', '.join(_FORMATS)})"
        )
    return struct.pack(f"<{len(data)}{code}", *data)
