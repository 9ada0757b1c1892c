"""Secrets kept out of any text the tool writes (issue 22: a server that echoes our headers).

:func:`redact` replaces, in any text: the configured secrets themselves (as they are, URL- and
JSON-escaped); ``Bearer``/``Basic`` credentials; the value after a credential name
(``Authorization:``, ``"api_key": "..."``, ``api-key=`` in a URL, ``x-api-key``,
``access_token``, ``client_secret``, ``password``); and the user-info part of a URL
(``https://user:pass@host``). The OpenAI backend redacts where it forms an error text, before
any cut (a cut secret would survive as a prefix); the rollout job redacts again where it
writes ``logs/errored/<shard>.json`` and the job log.

Every pattern is anchored on a literal and its repetitions are bounded, so the time is linear
in the text (a 1 MB error body is redacted in milliseconds).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote

REDACTED = "[redacted]"

_CREDENTIAL = r"[A-Za-z0-9._~+/=%:-]{1,4096}"
_SCHEME = re.compile(  # "Basic" only before 8+ base64 characters: "Basic usage" is prose
    rf"\b(Bearer)[ \t]{{1,8}}{_CREDENTIAL}|\b(Basic)[ \t]{{1,8}}[A-Za-z0-9+/]{{8,4096}}",
    re.IGNORECASE)
_NAMED = re.compile(
    r"(?<![A-Za-z0-9])((?:proxy-)?authorization|x-api-key|api[-_]?key|access[-_]?token"
    r"|client[-_]?secret|password|passwd)"
    r"(\\?[\"']?[ \t]{0,8}[:=][ \t]{0,8}\\?[\"']?)"
    r"(?:(?:Bearer|Basic)[ \t]{1,8})?[^\s\"'\\&,;}<>]{1,4096}", re.IGNORECASE)
_USERINFO = re.compile(r"://[^/\s@]{1,256}@")
#: characters of a text :func:`excerpt` reads (its answer is far shorter)
_WINDOW = 16 * 2**10


def redact(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every secret and credential-looking value replaced by ``[redacted]``."""
    if not text:
        return text
    forms: set[str] = set()
    for s in secrets:
        if s and s.strip():
            forms.update({s, quote(s, safe=""), json.dumps(s)[1:-1]})
    for form in sorted(forms, key=len, reverse=True):  # longest first: no partial leftovers
        text = text.replace(form, REDACTED)
    text = _NAMED.sub(lambda m: f"{m.group(1)}{m.group(2)}{REDACTED}", text)
    text = _SCHEME.sub(lambda m: f"{m.group(1) or m.group(2)} {REDACTED}", text)
    return _USERINFO.sub(f"://{REDACTED}@", text)


def excerpt(text: str, limit: int, secrets: Iterable[str] = ()) -> str:
    """``text`` redacted, then one line of at most ``limit`` characters. Redaction comes before
    the cut, and when the text is longer than the window read, the window's last characters
    (as many as the longest escaped secret) are dropped too: a secret across the window's end
    would otherwise survive as a prefix."""
    secrets = [s for s in secrets if s and s.strip()]
    red = redact(text[:_WINDOW], secrets)
    if len(text) > _WINDOW:
        margin = max((3 * len(s.encode()) + 8 for s in secrets), default=0)
        red = red[: max(0, len(red) - margin)]
    return " ".join(red.split())[:limit]


def configured_secrets(options: Mapping[str, Any] | None) -> list[str]:
    """The secrets a backend's options point at: the API key named by ``api_key_env``."""
    env = (options or {}).get("api_key_env")
    value = os.environ.get(str(env)) if env else None
    return [value] if value else []
