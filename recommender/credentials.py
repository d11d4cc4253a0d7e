"""Credentials on the wire: read from the environment variable that names them, sent as one `Authorization` header,
and never sent where the user did not send them.

    api_key(variable)                 -> the key in that environment variable (InputError naming it when unset)
    bearer(key) / basic(user, pw)     -> {"Authorization": ...}
    without_userinfo(url)             -> (the URL without user:password@, the user and password it held)
    open_url(request, timeout_s)      -> urllib's answer; a redirect to another scheme, host or port drops
                                         `Authorization` (urllib copies every header to the redirected request)

Messages never hold a credential: every error passes through redaction.redact (errors.py).
"""

from __future__ import annotations

import base64
import os
import urllib.parse
import urllib.request
from collections.abc import Mapping
from http.client import HTTPMessage
from typing import Any

from recommender.errors import InputError

AUTHORIZATION = "Authorization"
_DEFAULT_PORTS = {"http": 80, "https": 443}


def api_key(
    variable: str,
    setting: str = "target.api_key_env",
    where: str = "this environment",
    env: Mapping[str, str] | None = None,
) -> str:
    """The key in environment variable `variable` (of `env`, os.environ by default); InputError (exit 2) naming the
    setting and the fix when it is unset or empty."""
    key = (os.environ if env is None else env).get(variable, "").strip()
    if not key:
        raise InputError(
            f"{setting} names {variable}, which is not set in {where} (or is empty)",
            hint=f"export {variable}=<the endpoint's API key> before `recommender run` (and before `recommender "
            f"worker` on every load worker host), or remove {setting} for an endpoint that takes no key",
        )
    return key


def bearer(key: str) -> dict[str, str]:
    return {AUTHORIZATION: f"Bearer {key}"}


def basic(user: str, password: str) -> dict[str, str]:
    return {AUTHORIZATION: "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def without_userinfo(url: str) -> tuple[str, str | None, str | None]:
    """`url` without its user part, and the (unquoted) user and password it held (None when it held none)."""
    parts = urllib.parse.urlsplit(url)
    if "@" not in parts.netloc:
        return url, None, None
    host = parts.netloc.rpartition("@")[2]
    user, password = parts.username, parts.password
    plain = urllib.parse.urlunsplit(parts._replace(netloc=host))
    return plain, urllib.parse.unquote(user or ""), None if password is None else urllib.parse.unquote(password)


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) with the scheme's default port filled in: what a credential is given to."""
    parts = urllib.parse.urlsplit(url)
    scheme = parts.scheme.lower()
    return scheme, (parts.hostname or "").lower(), parts.port or _DEFAULT_PORTS.get(scheme)


class _SameOriginCredentials(urllib.request.HTTPRedirectHandler):
    """Follows redirects as urllib does, without `Authorization` when the redirect leaves the origin it was sent to."""

    def redirect_request(
        self, req: urllib.request.Request, fp: Any, code: int, msg: str, headers: HTTPMessage, newurl: str
    ) -> urllib.request.Request | None:
        new = super().redirect_request(req, fp, code, msg, headers, newurl)
        if new is not None and origin(new.full_url) != origin(req.full_url):
            new.remove_header(AUTHORIZATION)
        return new


def open_url(request: urllib.request.Request, timeout_s: float) -> Any:
    """urllib.request.urlopen, with redirects to another origin stripped of `Authorization`."""
    return urllib.request.build_opener(_SameOriginCredentials).open(request, timeout=timeout_s)
