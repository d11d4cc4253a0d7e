"""Credentials hidden in every message and log: `redact`, the one function every error's message and hint passes
through (errors.py) and every URL the platform prints, logs or stores passes through.

    redact("MLflow at http://user:s3cret@host cannot be reached") -> "MLflow at http://user:***@host cannot be reached"
    redact_document(spec_json)  -> the same document, every string redacted (the experiment as the store keeps it)

What it hides: the password in a URL's user part (a user alone, which may be a token, is hidden whole), the value of
an `Authorization` scheme (`Bearer ...`, `Basic ...`, `Token ...`: 8 or more token characters that are not a
lowercase word), query parameters named like a credential
(`?token=`, `api_key=`, `X-Amz-Signature=`), the values of this process's environment variables named like one
(..._KEY, ..._TOKEN, ..._SECRET, ..._PASSWORD: MLFLOW_TRACKING_TOKEN, OPENAI_API_KEY, AWS_SECRET_ACCESS_KEY), and
any value passed in `secrets` (the variable `api_key_env` names, whatever its name). Imports nothing: errors.py and
the Locust child use it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from typing import Any

MASK = "***"
_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
_SHORTEST_SECRET = 8  # shorter values of such variables (a flag, "true") are not hidden: they would mangle text
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.\-]*://)(?P<user>[^\s/?#@:]*)(?P<password>:[^\s/?#@]*)?@")
_AUTH_SCHEME = re.compile(
    r"\b(?P<scheme>Bearer|Basic|Token)(?P<gap>\s+)(?P<value>[A-Za-z0-9._~+/=\-]{8,})", re.IGNORECASE
)
_QUERY = re.compile(
    r"(?P<name>[?&;][A-Za-z0-9_\-.]*(?:token|key|password|passwd|secret|signature|sig|credential)[A-Za-z0-9_\-.]*=)"
    r"[^&;#\s'\"]+",
    re.IGNORECASE,
)


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """`text` with every credential it holds replaced by ***."""
    for value in sorted({*secrets, *environment_secrets()}, key=len, reverse=True):
        if value:
            text = text.replace(value, MASK)
    text = _USERINFO.sub(_userinfo, text)
    text = _AUTH_SCHEME.sub(_scheme_value, text)
    return _QUERY.sub(lambda m: f"{m['name']}{MASK}", text)


def redact_document(value: Any) -> Any:
    """Every string in a JSON-like document (dicts, lists) redacted; other values as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_document(item) for key, item in value.items()}
    if isinstance(value, list):
        return [redact_document(item) for item in value]
    return value


def environment_secrets() -> set[str]:
    """The values of this process's environment variables named like a credential (long enough to be one)."""
    return {
        value.strip()
        for name, value in os.environ.items()
        if _SECRET_NAME.search(name) and len(value.strip()) >= _SHORTEST_SECRET
    }


def _userinfo(match: re.Match[str]) -> str:
    if match["password"] is not None:
        return f"{match['scheme']}{match['user']}:{MASK}@"
    return f"{match['scheme']}{MASK}@"


def _scheme_value(match: re.Match[str]) -> str:
    """A credential after the scheme; a plain lowercase word ("basic authentication") is prose, kept."""
    value = match["value"]
    if value.isalpha() and value.islower():
        return match[0]
    return f"{match['scheme']}{match['gap']}{MASK}"
