"""An OpenAI-compatible server's reply, read as untrusted input (issue 22, "hostile servers").

Three things a server cannot do to the rollout through its reply:

- **Hold memory.** :func:`read_reply` streams the body and counts bytes twice: as they come off
  the wire (compressed) and after ``Content-Encoding`` is undone, each against the cap
  (``max_response_bytes``, default :data:`DEFAULT_MAX_RESPONSE_BYTES`). Decompression is ours,
  with zlib's ``max_length``, so a 1 MB gzip that inflates to 4 GiB never produces more than
  the cap plus one byte. We ask for ``gzip, deflate`` only; any other encoding is an error. An
  error reply (not 200) is read up to :data:`ERROR_BODY_BYTES` and cut there.
- **Crash the parser.** :func:`check_completion` is the one schema of a chat completion: every
  field we read is checked for its type and range before use; the first bad one is a
  :class:`ReplyError` whose text names it (``choices[0].message.tool_calls must be an array,
  not object``), never a traceback.
- **Pass an error off as an outcome.** :func:`is_context_overflow` accepts only explicit codes
  or the servers' documented messages (:data:`OVERFLOW_CODES`, :data:`OVERFLOW_PHRASES`) in
  the parsed error object of a 400/413, never a word found anywhere in the body.

The deadline on the whole exchange (connect, headers and every read) is the caller's
(``asyncio.timeout`` in :mod:`containmentbench.models.openai_backend`).
"""

from __future__ import annotations

import json
import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.models.base import Completion
from containmentbench.models.redact import excerpt as shown

#: default cap on a reply's bytes, compressed and decompressed (a 512-token answer is ~10 KB)
DEFAULT_MAX_RESPONSE_BYTES = 8 * 2**20
#: the bounds ``backend.options.max_response_bytes`` must lie in
MAX_RESPONSE_BYTES_RANGE = (2**10, 64 * 2**20)
#: bytes of an error reply kept (enough for any server's error object)
ERROR_BODY_BYTES = 64 * 2**10
#: the encodings we decode ourselves, hence the only ones we accept
ACCEPT_ENCODING = "gzip, deflate"
#: token counts above this are not counts (int64 columns sum them)
MAX_TOKENS = 2**31 - 1

#: ``error.code`` (OpenAI) or ``error.type`` (llama.cpp server) that mean a context overflow
OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error"})
#: documented messages: OpenAI's and vLLM's "This model's maximum context length is N tokens.
#: However, ..." and vLLM's engine check "The decoder prompt (length N) is longer than the
#: maximum model length of M"
OVERFLOW_PHRASES = ("maximum context length is", "is longer than the maximum model length")


class ReplyError(Exception):
    """A reply that cannot be used; ``str(exc)`` is the one-line provider error (any text of
    the server's in it is redacted before it is cut)."""


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    body: bytes                  # decoded, at most the cap (error replies: ERROR_BODY_BYTES)
    content_type: str
    retry_after: str | None


async def read_reply(client: Any, url: str, payload: dict[str, Any], cap: int,
                     secrets: Sequence[str] = ()) -> Reply:
    """POST ``payload`` and read the reply within ``cap`` bytes (module docstring)."""
    async with client.stream("POST", url, json=payload) as response:
        status = response.status_code
        headers = response.headers
        if status == 200:
            body = await _read_capped(response, cap, True, secrets)
        else:
            body = await _read_capped(response, min(cap, ERROR_BODY_BYTES), False, secrets)
        return Reply(status, body, headers.get("content-type", ""), headers.get("retry-after"))


async def _read_capped(response: Any, cap: int, strict: bool, secrets: Sequence[str]) -> bytes:
    """The decoded body, at most ``cap`` bytes. ``strict`` (a 200): over the cap or
    undecodable is a :class:`ReplyError`; else (an error reply) the body is cut there, and
    left empty when it cannot be decoded, so the status still decides."""
    declared = response.headers.get("content-length", "")
    if strict and declared.isdigit() and (len(declared) > 15 or int(declared) > cap):
        raise ReplyError(f"response too large: Content-Length {declared[:20]} is over the "
                         f"{cap}-byte cap (backend.options.max_response_bytes)")
    encoding = response.headers.get("content-encoding", "").strip().lower()
    try:
        inflater = _inflater(encoding, secrets)
    except ReplyError:
        if strict:
            raise
        return b""
    out = bytearray()
    raw = 0
    async for chunk in response.aiter_raw():
        raw += len(chunk)
        pending = False
        if inflater is None:
            data = chunk
        else:
            try:  # never more than one byte past the cap, whatever the ratio
                data = inflater.decompress(chunk, cap - len(out) + 1)
            except zlib.error:
                if not strict:
                    return bytes(out)
                raise ReplyError(f"malformed response: the body is not valid {encoding}") \
                    from None
            pending = bool(inflater.unconsumed_tail)  # output left over: over the cap
        out += data
        if raw > cap or len(out) > cap or pending:
            if not strict:
                return bytes(out[:cap])
            what = "decoded" if len(out) > cap or pending else "on the wire"
            raise ReplyError(f"response too large: over the {cap}-byte cap ({what}; "
                             f"backend.options.max_response_bytes)")
    if strict and inflater is not None and not inflater.eof:
        raise ReplyError(f"malformed response: the body is not valid {encoding} (it ends "
                         f"early)")
    return bytes(out)


def _inflater(encoding: str, secrets: Sequence[str]) -> Any:
    if encoding in ("", "identity"):
        return None
    if encoding in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if encoding == "deflate":  # HTTP's deflate is the zlib format (RFC 9110, 8.4.1.2)
        return zlib.decompressobj(zlib.MAX_WBITS)
    raise ReplyError(f"malformed response: Content-Encoding '{shown(encoding, 40, secrets)}' "
                     f"was not asked for (we accept {ACCEPT_ENCODING})")


# --------------------------------------------------------------------------- parsing
def parse_json(body: bytes) -> Any:
    """JSON or :class:`ValueError` (bad UTF-8, bad syntax, nesting too deep)."""
    try:
        return json.loads(body)
    except RecursionError:
        raise ValueError("nested too deeply") from None


def parse_completion(reply: Reply, expected_model: str, secrets: Sequence[str] = ()
                     ) -> Completion:
    """A 200 reply as a Completion, or :class:`ReplyError` (one line, names the field)."""
    try:
        data = parse_json(reply.body)
    except ValueError:
        kind = f" ({shown(reply.content_type, 60, secrets)})" if reply.content_type else ""
        raise ReplyError(f"malformed response: the body{kind} is not JSON: "
                         f"{shown(reply.body.decode('utf-8', 'replace'), 120, secrets)}") \
            from None
    try:
        return check_completion(data, expected_model, secrets)
    except RecursionError:  # arguments that parsed but nest too deeply to render again
        raise ReplyError("malformed response: the body is nested too deeply") from None


def check_completion(data: Any, expected_model: str, secrets: Sequence[str] = ()
                     ) -> Completion:
    """The one schema of an OpenAI chat completion: every field read is checked here first."""
    _need(isinstance(data, dict), "the body", "an object", data)
    if "choices" not in data and "error" in data:  # some servers answer 200 with an error
        raise ReplyError(f"provider error in a 200 reply: "
                         f"{shown(_error_text(data), 200, secrets)}")
    model = data.get("model")
    _need(isinstance(model, str) and 0 < len(model) <= 1000, "model", "a model name", model)
    choices = data.get("choices")
    _need(isinstance(choices, list) and len(choices) > 0, "choices", "a non-empty array",
          choices)
    choice = choices[0]
    _need(isinstance(choice, dict), "choices[0]", "an object", choice)
    finish = choice.get("finish_reason")
    _need(finish is None or (isinstance(finish, str) and len(finish) <= 64),
          "choices[0].finish_reason", "a short string or null", finish)
    message = choice.get("message")
    _need(isinstance(message, dict), "choices[0].message", "an object", message)
    content = message.get("content")
    _need(content is None or isinstance(content, str), "choices[0].message.content",
          "a string or null", content)
    calls = message.get("tool_calls")
    _need(calls is None or isinstance(calls, list), "choices[0].message.tool_calls",
          "an array or null", calls)
    native, rendered = None, []
    if calls:  # structured calls: kept as JSON text for our parser, and as the server's parse
        parsed = []
        for i, call in enumerate(calls):
            at = f"choices[0].message.tool_calls[{i}]"
            _need(isinstance(call, dict), at, "an object", call)
            fn = call.get("function")
            _need(isinstance(fn, dict), f"{at}.function", "an object", fn)
            name = fn.get("name")
            _need(isinstance(name, str) and 0 < len(name) <= 256, f"{at}.function.name",
                  "a tool name", name)
            args = _arguments(fn.get("arguments"), f"{at}.function.arguments")
            rendered.append(json.dumps({"tool": name, "args": args}, sort_keys=True))
            parsed.append({"name": name, "arguments": args})
        native = canonical_json(parsed)
    usage = data.get("usage")
    _need(usage is None or isinstance(usage, dict), "usage", "an object or null", usage)
    tokens = []
    for key in ("prompt_tokens", "completion_tokens"):
        n = (usage or {}).get(key)
        _need(n is None or (type(n) is int and 0 <= n <= MAX_TOKENS), f"usage.{key}",
              f"an integer from 0 to {MAX_TOKENS}", n)
        tokens.append(n or 0)
    # the prefix cache's share of the prompt, where the server says (vLLM's server with
    # --enable-prompt-tokens-details, OpenAI's API): throughput only (pipeline/throughput.py)
    details = (usage or {}).get("prompt_tokens_details")
    _need(details is None or isinstance(details, dict), "usage.prompt_tokens_details",
          "an object or null", details)
    cached = (details or {}).get("cached_tokens")
    _need(cached is None or (type(cached) is int and 0 <= cached <= MAX_TOKENS),
          "usage.prompt_tokens_details.cached_tokens", f"an integer from 0 to {MAX_TOKENS}",
          cached)
    if model != expected_model:
        raise ReplyError(f"served model '{shown(model, 200, secrets)}' is not the requested "
                         f"'{expected_model}' (a server that aliases names: set "
                         f"backend.options.served_model)")
    text = "\n".join([content or "", *rendered]) if content else "\n".join(rendered)
    return Completion(text=text, prompt_tokens=tokens[0], completion_tokens=tokens[1],
                      finish_reason=finish, native_calls=native, served_model=model,
                      cached_tokens=cached)


def _arguments(args: Any, at: str) -> Any:
    """Tool-call arguments: a JSON string (parsed when it parses to finite JSON, else kept as
    text for our parser), an object, or null."""
    _need(args is None or isinstance(args, (str, dict)), at, "a string, an object or null",
          args)
    if isinstance(args, str):
        try:
            value = parse_json(args)
            canonical_json(value)  # NaN and 1e400 parse, but no trace may hold them
        except (ValueError, RecursionError):
            return args
        return value
    if isinstance(args, dict):
        try:
            canonical_json(args)
        except (ValueError, RecursionError):
            raise ReplyError(f"malformed response: {at} holds a non-finite number") from None
    return args


def _need(ok: bool, field: str, what: str, value: Any) -> None:
    if not ok:
        raise ReplyError(f"malformed response: {field} must be {what}, not {_kind(value)}")


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        shown = "inf" if isinstance(value, float) and math.isinf(value) else repr(value)[:24]
        return f"the number {shown}"
    names = {dict: "an object", list: "an array"}
    if isinstance(value, str):  # never its text: it may hold what the server echoed
        return f"a string of {len(value)} characters"
    return names.get(type(value), type(value).__name__)


# --------------------------------------------------------------------------- errors
def is_context_overflow(status: int, body: bytes) -> bool:
    """A 400/413 whose parsed error object carries an overflow code or a documented message."""
    if status not in (400, 413):
        return False
    try:
        data = parse_json(body)
    except ValueError:
        return False
    if not isinstance(data, dict):
        return False
    err = data.get("error")
    fields = [err] if isinstance(err, dict) else [data]
    for obj in fields:
        for key in ("code", "type"):
            if isinstance(obj.get(key), str) and obj[key] in OVERFLOW_CODES:
                return True
    message = _error_text(data).lower()
    return any(p in message for p in OVERFLOW_PHRASES)


def _error_text(data: dict[str, Any]) -> str:
    """The message of an error object: ``error.message`` (OpenAI, vLLM), a string ``error``,
    or a top-level ``message`` (older vLLM)."""
    err = data.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return err["message"]
    if isinstance(err, str):
        return err
    return data["message"] if isinstance(data.get("message"), str) else ""
