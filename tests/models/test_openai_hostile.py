"""OpenAIBackend against a real server on 127.0.0.1 that misbehaves (issue 22, hostile servers).

Every case ends as a one-line provider error (``Completion.error``), quickly, with bounded
memory, no traceback and no secret in any error or log line: a server that drips bytes,
headers or SSE events; an endless body; a gzip or deflate bomb; every malformed shape of a
chat completion; a 400 that merely says "length"; a server that answers for another model;
a server that echoes our ``Authorization`` header.
"""

from __future__ import annotations

import json
import logging
import socketserver
import threading
import time
import tracemalloc
import zlib
from collections import Counter

import pytest

from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig, GenerationRequest, make_backend

pytest.importorskip("httpx")

KEY = "sk-hostile-0123456789abcdef"
MiB = 2**20


def _good(**over) -> dict:
    body = {"id": "x", "object": "chat.completion", "model": "stub",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "fine"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2}}
    body.update(over)
    return body


def _message(**over) -> dict:
    return _good(choices=[{"index": 0, "finish_reason": "stop",
                           "message": {"role": "assistant", "content": None, **over}}])


def _bomb(size: int, wbits: int) -> bytes:
    """``size`` zero bytes, compressed (about 1000:1) without holding them in memory."""
    z = zlib.compressobj(9, zlib.DEFLATED, wbits)
    block = bytes(MiB)
    return b"".join(z.compress(block) for _ in range(size // MiB)) + z.flush()


BOMB_GZIP = _bomb(256 * MiB, 16 + zlib.MAX_WBITS)
BOMB_DEFLATE = _bomb(256 * MiB, zlib.MAX_WBITS)


# --------------------------------------------------------------------------- the server
class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Handler(socketserver.StreamRequestHandler):
    """Reads one request, then plays the case named by its first user message."""

    def handle(self) -> None:
        try:
            request = self._read()
            case = request["body"]["messages"][0]["content"]
            with self.server.lock:
                self.server.seen.append(request)
                self.server.counts[case] += 1
                request["n"] = self.server.counts[case]
            CASES[case](self, request)
        except OSError:  # the client hung up: what a deadline or a cap does
            pass

    def _read(self) -> dict:
        self.request.settimeout(30)
        self.rfile.readline()
        headers = {}
        while (line := self.rfile.readline().decode().strip()):
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        body = json.loads(self.rfile.read(int(headers["content-length"])))
        return {"headers": headers, "body": body}

    # -- writing
    def head(self, status: int = 200, *headers: str) -> None:
        lines = [f"HTTP/1.1 {status} X", "Connection: close", *headers]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.wfile.flush()

    def send(self, status: int, body: bytes | dict | str, *headers: str) -> None:
        if isinstance(body, dict):
            body = json.dumps(body)
        data = body.encode() if isinstance(body, str) else body
        self.head(status, f"Content-Length: {len(data)}", *headers)
        self.wfile.write(data)
        self.wfile.flush()

    def chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def pause(self, seconds: float) -> bool:
        """Sleep; False once the test is over (the server is stopping)."""
        return not self.server.stop.wait(seconds)


def _drip_bytes(h: _Handler, req: dict) -> None:
    h.head(200, "Content-Length: 100000", "Content-Type: application/json")
    for _ in range(20):  # 20 s at most: an unbounded attempt shows as a latency, not a hang
        h.wfile.write(b" ")
        h.wfile.flush()
        if not h.pause(1.0):
            return


def _drip_sse(h: _Handler, req: dict) -> None:
    h.head(200, "Content-Type: text/event-stream", "Transfer-Encoding: chunked")
    event = json.dumps({"choices": [{"delta": {"content": "a"}}]})
    for _ in range(40):
        h.chunk(f"data: {event}\n\n".encode())
        if not h.pause(0.5):
            return


def _drip_headers(h: _Handler, req: dict) -> None:
    h.wfile.write(b"HTTP/1.1 200 OK\r\n")
    for i in range(40):
        h.wfile.write(f"X-Slow-{i}: yes\r\n".encode())
        h.wfile.flush()
        if not h.pause(0.5):
            return


def _slow_but_complete(h: _Handler, req: dict) -> None:
    data = json.dumps(_good()).encode()
    h.head(200, f"Content-Length: {len(data)}")
    for part in (data[: len(data) // 2], data[len(data) // 2:]):
        h.wfile.write(part)
        h.wfile.flush()
        h.pause(0.5)


def _endless(h: _Handler, req: dict) -> None:
    h.head(200, "Content-Type: application/json", "Transfer-Encoding: chunked")
    block = b"[" * 65536
    for _ in range(4096):  # 256 MiB at most
        h.chunk(block)


def _chunked_bomb(h: _Handler, req: dict) -> None:
    h.head(200, "Transfer-Encoding: chunked", "Content-Encoding: gzip")
    for i in range(0, len(BOMB_GZIP), 16384):
        h.chunk(BOMB_GZIP[i:i + 16384])
    h.wfile.write(b"0\r\n\r\n")


def _gzip_padding(h: _Handler, req: dict) -> None:
    """A gzip stream of empty stored blocks: endless on the wire, nothing once inflated."""
    z = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    h.head(200, "Transfer-Encoding: chunked", "Content-Encoding: gzip")
    h.chunk(z.compress(b"{") + z.flush(zlib.Z_SYNC_FLUSH))
    for _ in range(1024):  # 64 MiB at most
        h.chunk(b"\0\0\xff\xff" * 16384)


def _compressed(data: bytes, encoding: str):
    return lambda h, req: h.send(200, data, "Content-Type: application/json",
                                 f"Content-Encoding: {encoding}")


def _status(status: int, body, *headers: str):
    return lambda h, req: h.send(status, body, *headers)


def _echo_headers(status: int):
    return lambda h, req: h.send(status, {"error": {"message": "bad request",
                                                    "received": req["headers"]}})


def _echo_raw(status: int, template: str):
    return lambda h, req: h.send(status, template.format(auth=req["headers"]["authorization"],
                                                         key=KEY))


def _gz(payload: dict, wbits: int) -> bytes:
    z = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return z.compress(json.dumps(payload).encode()) + z.flush()


TOOL_REPLY = _message(tool_calls=[
    {"id": "c1", "type": "function",
     "function": {"name": "send_email", "arguments": '{"to": "a@b.c", "n": NaN}'}},
    {"id": "c2", "type": "function",
     "function": {"name": "read_file", "arguments": {"path": "x.txt"}}},
    {"id": "c3", "type": "function", "function": {"name": "list", "arguments": "{oops"}}])
TOOL_REPLY["choices"][0]["finish_reason"] = "tool_calls"

#: 200 bodies that break the schema -> the field the error must name
MALFORMED = {
    "message-string": (_good(choices=[{"message": "hi"}]), "choices[0].message must be"),
    "tool-calls-dict": (_message(tool_calls={"function": {"name": "x"}}),
                        "choices[0].message.tool_calls must be an array or null, not an object"),
    "function-string": (_message(tool_calls=[{"function": "send_email"}]),
                        "tool_calls[0].function must be an object, not a string"),
    "name-missing": (_message(tool_calls=[{"function": {"arguments": "{}"}}]),
                     "tool_calls[0].function.name must be a tool name, not null"),
    "args-number": (_message(tool_calls=[{"function": {"name": "x", "arguments": 5}}]),
                    "function.arguments must be a string, an object or null"),
    "args-infinite": ('{"model": "stub", "choices": [{"message": {"tool_calls": [{"function": '
                      '{"name": "x", "arguments": {"n": 1e400}}}]}}]}',
                      "tool_calls[0].function.arguments holds a non-finite number"),
    "usage-list": (_good(usage=[5, 2]), "usage must be an object or null, not an array"),
    "usage-1e400": ('{"model": "stub", "choices": [{"message": {"content": "x"}}], '
                    '"usage": {"prompt_tokens": 1e400}}',
                    "usage.prompt_tokens must be an integer from 0 to 2147483647, not the "
                    "number inf"),
    "usage-negative": (_good(usage={"completion_tokens": -3}), "usage.completion_tokens"),
    "usage-float": (_good(usage={"prompt_tokens": 5.5}), "usage.prompt_tokens"),
    "usage-bool": (_good(usage={"prompt_tokens": True}), "not a boolean"),
    "content-number": (_message(content=7), "choices[0].message.content must be a string"),
    "finish-number": (_good(choices=[{"finish_reason": 3, "message": {"content": "x"}}]),
                      "choices[0].finish_reason"),
    "choices-empty": (_good(choices=[]), "choices must be a non-empty array, not an array"),
    "choices-missing": ({"model": "stub"}, "choices must be a non-empty array, not null"),
    "choice-list": (_good(choices=[[1]]), "choices[0] must be an object, not an array"),
    "body-array": ("[1]", "the body must be an object, not an array"),
    "body-string": ('"hi"', "the body must be an object"),
    "not-json": ("hello", "the body (application/json) is not JSON: hello"),
    "deep": ("[" * 200_000, "is not JSON"),
    "bad-utf8": (b'{"model": "\xff\xfe"}', "is not JSON"),
    "model-missing": ({k: v for k, v in _good().items() if k != "model"},
                      "model must be a model name, not null"),
    "model-number": (_good(model=3), "model must be a model name, not the number 3"),
    "model-other": (_good(model="gpt-evil"),
                    "served model 'gpt-evil' is not the requested 'stub'"),
    "error-200": ({"error": {"message": "boom"}}, "provider error in a 200 reply: boom"),
}

#: (status, body) of a rejection -> counted as a context overflow?
REJECTIONS = {
    "length-word": (400, {"error": {"message": "length"}}, False),
    "length-phrase": (400, {"error": {"message": "Please reduce the length of the messages."}},
                      False),
    "context-text": (400, "This model's maximum context length is 2048 tokens.", False),
    "too-large-413": (413, {"error": {"message": "Request too large: context length"}}, False),
    "code-404": (404, {"error": {"code": "context_length_exceeded"}}, False),
    "openai-code": (400, {"error": {"code": "context_length_exceeded", "message": "x"}}, True),
    "vllm-message": (400, {"error": {"message": (
        "This model's maximum context length is 2048 tokens. However, your prompt contains "
        "5000 input tokens."), "type": "BadRequestError", "param": None, "code": 400}}, True),
    "vllm-old": (400, {"object": "error", "message": "This model's maximum context length "
                       "is 2048 tokens.", "code": 400}, True),
    "vllm-engine": (400, {"error": {"message": "The decoder prompt (length 5000) is longer "
                                    "than the maximum model length of 2048."}}, True),
    "llamacpp-type": (400, {"error": {"type": "exceed_context_size_error", "code": 400,
                                      "message": "the request exceeds the available context"}},
                      True),
}

CASES = {
    "drip-bytes": _drip_bytes,
    "drip-sse": _drip_sse,
    "drip-headers": _drip_headers,
    "slow-but-complete": _slow_but_complete,
    "endless": _endless,
    "gzip-bomb": _compressed(BOMB_GZIP, "gzip"),
    "deflate-bomb": _compressed(BOMB_DEFLATE, "deflate"),
    "gzip-bomb-chunked": _chunked_bomb,
    "gzip-padding": _gzip_padding,
    "declared-huge": lambda h, req: h.head(200, f"Content-Length: {10**12}"),
    "brotli": _status(200, b"\x0b\x02\x80{}\x03", "Content-Encoding: br"),
    "bad-gzip": _status(200, b"\x1f\x8b\x08\x00garbage", "Content-Encoding: gzip"),
    "tools": _status(200, TOOL_REPLY),
    "tools-gzip": _compressed(_gz(TOOL_REPLY, 16 + zlib.MAX_WBITS), "gzip"),
    "tools-deflate": _compressed(_gz(TOOL_REPLY, zlib.MAX_WBITS), "deflate"),
    "retry-after-inf": lambda h, req: (
        h.send(503, {"error": {"message": "busy"}}, "Retry-After: inf")
        if req["n"] == 1 else h.send(200, _good())),
    "echo-503": _echo_headers(503),
    "echo-400": _echo_headers(400),
    "echo-raw-400": _echo_raw(400, "Authorization: {auth} is not welcome"),
    "echo-200-text": _echo_raw(200, "you sent {key}, thanks"),
    "echo-cut": _echo_raw(503, "x" * 290 + "{key}"),
    "echo-window": _echo_raw(503, " " * 16370 + "{key}" + "y" * 20000),
    "echo-model": lambda h, req: h.send(200, _good(model=KEY)),
    "echo-encoding": _status(200, b"{}", f"Content-Encoding: {KEY}"),
    **{k: _status(200, v[0], "Content-Type: application/json")
       for k, v in MALFORMED.items()},
    **{k: _status(v[0], v[1]) for k, v in REJECTIONS.items()},
}


@pytest.fixture(scope="module")
def server():
    srv = _Server(("127.0.0.1", 0), _Handler)
    srv.lock = threading.Lock()
    srv.seen = []
    srv.counts = Counter()
    srv.stop = threading.Event()
    thread = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.stop.set()
    srv.shutdown()
    srv.server_close()


def _backend(url: str, **options):
    opts = {"base_url": url, "max_retries": 0, "timeout_s": 2, "seed_supported": False,
            **options}
    model = opts.pop("model", "stub")
    return make_backend(BackendConfig(name="openai", model=model, options=opts))


def _req(case: str) -> GenerationRequest:
    return GenerationRequest(request_id=case, messages=[{"role": "user", "content": case}],
                             tools=[], seed=1, max_tokens=8)


def _assert_provider_error(c, *, secret: str = KEY) -> None:
    assert isinstance(c.error, str) and c.error, c
    assert "\n" not in c.error and "Traceback" not in c.error, c.error
    assert len(c.error) < 600
    assert secret not in c.error and secret[:8] not in c.error, c.error
    assert c.text == "" and c.native_calls is None


# --------------------------------------------------------------------------- deadline
def test_a_dripping_server_ends_at_the_deadline_not_at_the_kill(server):
    _, url = server
    backend = _backend(url, timeout_s=2)
    cases = ["drip-bytes", "drip-sse", "drip-headers"]
    t0 = time.perf_counter()
    out = backend.generate([_req(c) for c in cases])
    assert time.perf_counter() - t0 < 6
    for c in out:
        _assert_provider_error(c)
        assert c.error == ("provider failed after 1 attempts: no complete reply within the "
                           "2 s deadline")
        assert c.latency_s < 6

    # each retry gets its own deadline; the retries are counted
    retried = _backend(url, timeout_s=1, max_retries=1, backoff_base_s=0.01)
    t0 = time.perf_counter()
    (c,) = retried.generate([_req("drip-bytes")])
    assert 2 <= time.perf_counter() - t0 < 5
    assert c.attempts == 2 and c.error.startswith("provider failed after 2 attempts: no ")

    # a slow server that completes within the deadline is fine: the deadline is not per read
    (ok,) = _backend(url, timeout_s=4).generate([_req("slow-but-complete")])
    assert ok.error is None and ok.text == "fine" and ok.latency_s >= 0.4


# --------------------------------------------------------------------------- byte cap
@pytest.mark.parametrize("case", ["endless", "gzip-bomb", "deflate-bomb", "gzip-bomb-chunked"])
def test_a_body_over_the_cap_is_an_error_with_bounded_memory(server, case):
    _, url = server
    backend = _backend(url, timeout_s=30)
    tracemalloc.start()
    try:
        t0 = time.perf_counter()
        (c,) = backend.generate([_req(case)])
        elapsed = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    _assert_provider_error(c)
    assert c.error == (f"response too large: over the {8 * MiB}-byte cap (decoded; "
                       f"backend.options.max_response_bytes)")
    assert elapsed < 10
    assert peak < 64 * MiB, f"peak {peak / MiB:.0f} MiB"  # the bombs inflate to 256 MiB


def test_the_cap_is_an_option_and_bounded(server):
    _, url = server
    small = _backend(url, max_response_bytes=64 * 1024)
    out = small.generate([_req("gzip-bomb-chunked"), _req("gzip-padding")])
    assert out[0].error.startswith("response too large: over the 65536-byte cap (decoded;")
    # compressed bytes count on their own: a stream that inflates to nothing still ends
    assert out[1].error.startswith("response too large: over the 65536-byte cap (on the wire;")
    (c,) = _backend(url).generate([_req("gzip-padding")])
    assert c.error.startswith(f"response too large: over the {8 * MiB}-byte cap (on the wire;")
    (c,) = _backend(url).generate([_req("declared-huge")])
    assert c.error.startswith("response too large: Content-Length 1000000000000 is over")
    for bad in (100, 2**30):
        with pytest.raises(BenchError, match="max_response_bytes"):
            _backend(url, max_response_bytes=bad)
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(BenchError, match="timeout_s"):
            _backend(url, timeout_s=bad)


def test_encodings_we_did_not_ask_for_or_cannot_decode(server):
    srv, url = server
    out = _backend(url).generate([_req("brotli"), _req("bad-gzip")])
    _assert_provider_error(out[0])
    assert out[0].error == ("malformed response: Content-Encoding 'br' was not asked for (we "
                            "accept gzip, deflate)")
    assert out[1].error == "malformed response: the body is not valid gzip (it ends early)"
    assert srv.seen[-1]["headers"]["accept-encoding"] == "gzip, deflate"


# --------------------------------------------------------------------------- one schema
@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_every_malformed_shape_is_a_one_line_error_naming_the_field(server, case):
    srv, url = server
    before = len(srv.seen)
    (c,) = _backend(url, max_retries=2, backoff_base_s=0.01).generate([_req(case)])
    _assert_provider_error(c)
    assert MALFORMED[case][1] in c.error, c.error
    prefix = "served model" if case == "model-other" else (
        "provider error" if case == "error-200" else "malformed response: ")
    assert c.error.startswith(prefix), c.error
    assert len(srv.seen) - before == 1  # not retried: the server's reply is the answer


def test_good_replies_parse_with_tool_calls_usage_and_encodings(server):
    _, url = server
    out = _backend(url).generate([_req("tools"), _req("tools-gzip"), _req("tools-deflate")])
    for c in out:
        assert c.error is None, c.error
        assert c.served_model == "stub"
        assert (c.prompt_tokens, c.completion_tokens) == (5, 2)
        assert c.finish_reason == "tool_calls"
        lines = c.text.split("\n")
        # NaN and broken JSON stay text for our parser; an object stays an object
        assert json.loads(lines[1]) == {"tool": "read_file", "args": {"path": "x.txt"}}
        assert json.loads(lines[2]) == {"tool": "list", "args": "{oops"}
        assert json.loads(c.native_calls)[0] == {
            "name": "send_email", "arguments": '{"to": "a@b.c", "n": NaN}'}
    assert out[0].text == out[1].text == out[2].text


def test_retry_after_of_infinity_is_bounded(server):
    _, url = server
    backend = _backend(url, max_retries=1, backoff_base_s=0.01, backoff_max_s=0.05)
    t0 = time.perf_counter()
    (c,) = backend.generate([_req("retry-after-inf")])
    assert c.error is None and c.attempts == 2 and time.perf_counter() - t0 < 2


# --------------------------------------------------------------------------- served model
def test_served_model_must_match_unless_an_alias_is_declared(server):
    _, url = server
    (c,) = _backend(url, model="stub-alias").generate([_req("tools")])
    assert c.error == ("served model 'stub' is not the requested 'stub-alias' (a server that "
                       "aliases names: set backend.options.served_model)")
    aliased = _backend(url, model="stub-alias", served_model="stub")
    assert aliased.served_model == "stub"
    (c,) = aliased.generate([_req("tools")])
    assert c.error is None and c.served_model == "stub"


# --------------------------------------------------------------------------- context overflow
@pytest.mark.parametrize("case", sorted(REJECTIONS))
def test_context_overflow_only_from_explicit_codes_or_documented_messages(server, case):
    status, _, overflow = REJECTIONS[case]
    _, url = server
    (c,) = _backend(url).generate([_req(case)])
    _assert_provider_error(c)
    assert c.error.startswith("context overflow: " if overflow else f"HTTP {status}: "), c.error


# --------------------------------------------------------------------------- secrets
@pytest.mark.parametrize("case", ["echo-503", "echo-400", "echo-raw-400", "echo-200-text",
                                  "echo-cut", "echo-window", "echo-model", "echo-encoding"])
def test_an_echoed_key_is_redacted_from_errors_and_logs(server, case, monkeypatch, caplog):
    srv, url = server
    monkeypatch.setenv("CB_HOSTILE_KEY", KEY)
    backend = _backend(url, api_key_env="CB_HOSTILE_KEY", max_retries=1, backoff_base_s=0.01)
    with caplog.at_level(logging.WARNING, logger="containmentbench.models.openai_backend"):
        (c,) = backend.generate([_req(case)])
    assert srv.seen[-1]["headers"]["authorization"] == f"Bearer {KEY}"  # the server got it
    _assert_provider_error(c)
    assert "[redacted]" in c.error or case in ("echo-cut", "echo-window"), c.error
    for record in caplog.records:
        assert KEY[:8] not in record.getMessage()
    if case == "echo-503":
        assert caplog.records and c.error.startswith("provider failed after 2 attempts: HTTP 503")


def test_deeply_nested_arguments_stay_text_and_never_raise():
    from containmentbench.models.http_response import check_completion

    deep = "[" * 100_000 + "]" * 100_000
    body = _message(tool_calls=[{"function": {"name": "x", "arguments": deep}}])
    c = check_completion(body, "stub")
    assert json.loads(c.native_calls) == [{"name": "x", "arguments": deep}]
