"""One inference before the load starts: proves the deployed model answers correctly, or says why not."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from recommender.errors import TargetError


def probe_inference(endpoint: str, model_name: str, body: dict, timeout_s: float = 120.0) -> dict:
    """POST one KServe v2 request; returns the response JSON or raises TargetError with the server's answer."""
    url = f"{endpoint}/v2/models/{model_name}/infer"
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            answer = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise TargetError(f"the model answered HTTP {exc.code} to a test request: {detail}",
                          hint="See server.log in the run directory for the backend's error.") from exc
    except (urllib.error.URLError, TimeoutError, OSError) as exc:
        raise TargetError(f"no answer to a test request at {url}: {exc}", hint="See server.log in the run directory.") from exc
    if not answer.get("outputs"):
        raise TargetError(f"the model's answer has no outputs: {str(answer)[:300]}")
    return answer
