"""Secrets kept out of error text (models/redact.py): what is replaced, what is left, how fast."""

from __future__ import annotations

import json
import time
from urllib.parse import quote

import pytest

from containmentbench.models.redact import REDACTED, configured_secrets, excerpt, redact

KEY = "sk-live-0123456789abcdefXYZ"


@pytest.mark.parametrize("text", [
    json.dumps({"headers": {"Authorization": f"Bearer {KEY}"}}),
    f"Authorization: Bearer {KEY}\r\nHost: x",
    f"{{'authorization': 'Bearer {KEY}'}}",
    json.dumps(json.dumps({"Authorization": f"Bearer {KEY}"})),  # JSON inside a JSON string
    f"GET /v1/models?api_key={KEY}&x=1",
    f"openai_api_key={KEY}",
    f"x-api-key: {KEY}",
    f'"access_token": "{KEY}"',
    f"proxy-authorization=Basic {KEY}",
    f"https://user:{KEY}@example.com/v1",
    f"token {KEY} was echoed",
    f"quoted {quote(KEY + '/+', safe='')} and escaped {json.dumps(KEY + chr(34))}",
])
def test_credentials_are_redacted(text):
    secret = KEY + "/+" if "quoted" in text else KEY
    out = redact(text, [secret, KEY + '"'] if "quoted" in text else [KEY])
    assert KEY not in out and KEY[:8] not in out, out
    assert REDACTED in out


def test_patterns_redact_without_the_configured_secret():
    out = redact(f'{{"Authorization": "Bearer tok-{KEY}"}} Basic dXNlcjpwYXNzd29yZA== '
                 f"https://u:p@h/x?api-key=zzz")
    assert out == (f'{{"Authorization": "{REDACTED}"}} Basic {REDACTED}== '
                   f"https://{REDACTED}@h/x?api-key={REDACTED}")


def test_prose_is_left_alone():
    text = ("Basic usage: max_tokens: 5, prompt_tokens=3; This model's maximum context "
            "length is 2048 tokens. password reset")
    assert redact(text) == text
    assert redact("", [KEY]) == "" and redact("abc", ["", "  "]) == "abc"


def test_excerpt_redacts_before_the_cut():
    # the key across the 300-character cut: redacted whole, never shown as a prefix
    assert KEY[:8] not in excerpt("x" * 295 + KEY, 300, [KEY])
    # the key across the end of the window read: the window's tail is dropped
    long = " " * (16 * 1024 - 10) + KEY + "y" * 50_000
    assert KEY[:8] not in excerpt(long, 300, [KEY])
    assert excerpt("a\n  b\tc", 10) == "a b c"


def test_configured_secrets(monkeypatch):
    monkeypatch.setenv("CB_REDACT_KEY", KEY)
    assert configured_secrets({"api_key_env": "CB_REDACT_KEY"}) == [KEY]
    assert configured_secrets({"api_key_env": "CB_REDACT_NONE"}) == []
    assert configured_secrets(None) == [] == configured_secrets({"api_key_env": None})


@pytest.mark.parametrize("text", [
    "a" * 2**20, "a." * 2**19, "Bearer " * 150_000, ("Basic" + " " * 8) * 80_000,
    "authorization:" * 70_000, ("api_key" + " " * 8 + "=" + " " * 8) * 40_000,
    "://" * 350_000, ("://" + "u" * 255) * 4000, "Bearer " + "a" * 2**20,
])
def test_redaction_is_linear_on_adversarial_megabytes(text):
    t0 = time.perf_counter()
    redact(text, [KEY])
    excerpt(text, 300, [KEY])
    assert time.perf_counter() - t0 < 10  # about 0.3 s alone; a quadratic pattern takes hours
