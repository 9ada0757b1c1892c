"""Backend for any OpenAI-compatible chat server (``vllm serve``, ``transformers serve``, hosted).

One ``generate`` call sends every request concurrently (one event loop, one ``httpx.AsyncClient``,
at most ``concurrency`` requests in flight) to ``POST {base_url}/chat/completions``.

Errors never raise. Timeouts, connection errors, HTTP 408, 429 and 5xx are retried up to
``max_retries`` times with exponential backoff and jitter; the jitter comes from a
``random.Random`` seeded by (``retry_seed``, request id, request seed), so the delays a request
would wait are the same on every run, whatever the interleaving. After the last retry, on a
context-length rejection or on any other 4xx, that request gets ``Completion(error=...)`` and
the runtime ends its rollout with status ``error``; the other requests of the batch are
unaffected.

The server is untrusted (issue 22; :mod:`containmentbench.models.http_response`). ``timeout_s``
is a deadline on the whole attempt -- connect, headers and every read -- not per read, so a
server that drips a byte a second ends the attempt at ``timeout_s`` (each retry gets its own
deadline; waiting for a concurrency slot is not counted). The body is streamed and capped at
``max_response_bytes`` (default 8 MiB; compressed and decompressed), every field of a reply is
checked by one schema, and a reply that fails any of this is a one-line provider error, never a
traceback and never retried. A context overflow (error prefixed ``context overflow``, which the
runtime records instead of failing the shard) is only a 400/413 with an explicit code or a
server's documented message. The reply's ``model`` must be the requested model (or
``served_model``, for servers that alias names); it is kept in ``Completion.served_model``.
Every error text is redacted (:mod:`containmentbench.models.redact`: the API key, credential
headers and URL credentials) before it is cut, logged or returned.

``agenerate(request)`` is the same call for one request, awaited from the caller's event loop
(the asynchronous driver runs one task per episode; ``concurrency`` still bounds the requests in
flight per loop). Each completion records its attempts, latency, provider error text, the tool
mode and a hash of the request body (the server renders the chat template).

Seeds (paper 000, Appendix I): ``seed`` is sent per request when ``send_seed`` is true.
``seed_supported`` is measured by default (``"measure"``): one probe prompt, sampled at
temperature 1, sent with the same seed twice and then with another seed; the provider honours
seeds iff the first two texts agree and the third differs (``transformers serve`` ignores
seeds; a provider that is down or answers identically for every seed counts as unsupported).
``true``/``false`` override the measurement; it is false whenever ``send_seed`` is false. The
value is recorded in every rollout row (``provider_seed_supported``); it is never assumed.

Tool mode ``native`` sends the schemas in the OpenAI ``tools`` field (``tool_choice: auto``);
structured ``tool_calls`` in the answer are kept as JSON text for our parser. Tool mode
``constrained`` sends no ``tools`` but ``response_format: {"type": "json_schema", ...}`` with
the action schema of :mod:`containmentbench.models.constrained` (the schema vLLM's structured
outputs get), so the reply is one action of the request's tools or a final answer.

Throttling a shared server from Snakemake: rules that call this backend declare the custom
resource named by :data:`SNAKEMAKE_RESOURCE` (``resources: api_calls=1``) and the profile or
command line caps it (``--resources api_calls=4``), so at most that many rollout jobs talk to the
server at once; ``concurrency`` bounds the requests of one job.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import random
import threading
import time
from typing import Any

import httpx  # the `openai` extra; light, and a missing one is reported by make_backend

from containmentbench.errors import BenchError
from containmentbench.models.base import (
    TOOL_MODES,
    BackendConfig,
    Completion,
    GenerationRequest,
    native_tools,
    request_hash,
)
from containmentbench.models.constrained import response_format
from containmentbench.models.hf import resolve_options
from containmentbench.models.http_response import (
    ACCEPT_ENCODING,
    MAX_RESPONSE_BYTES_RANGE,
    ReplyError,
    is_context_overflow,
    parse_completion,
    read_reply,
    shown,
)
from containmentbench.models.options import defaults
from containmentbench.models.redact import redact

log = logging.getLogger(__name__)

#: Snakemake custom resource that throttles jobs sharing one server (``resources: api_calls=1``).
SNAKEMAKE_RESOURCE = "api_calls"

#: option -> default (typed schema: containmentbench.models.options)
OPTIONS: dict[str, Any] = defaults("openai")

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
#: characters of a server's text kept in an error
_SNIPPET = 300


class OpenAIBackend:
    name = "openai"

    def __init__(self, config: BackendConfig) -> None:
        self.config = config
        opts = resolve_options(config, OPTIONS)
        self.base_url = str(opts["base_url"]).rstrip("/")
        self.concurrency = int(opts["concurrency"])
        if self.concurrency < 1:
            raise BenchError("concurrency must be >= 1", field="backend.options.concurrency")
        self.timeout_s = float(opts["timeout_s"])
        if not (math.isfinite(self.timeout_s) and 0 < self.timeout_s <= 86400):
            raise BenchError(f"timeout_s must be a number of seconds in (0, 86400], not "
                             f"{opts['timeout_s']!r}", field="backend.options.timeout_s")
        self.max_response_bytes = int(opts["max_response_bytes"])
        lo, hi = MAX_RESPONSE_BYTES_RANGE
        if not lo <= self.max_response_bytes <= hi:
            raise BenchError(f"max_response_bytes must be from {lo} to {hi}, not "
                             f"{self.max_response_bytes}",
                             field="backend.options.max_response_bytes")
        #: the name the server must report in every reply's ``model``
        self.served_model = str(opts["served_model"] or config.model)
        self.max_retries = int(opts["max_retries"])
        self.backoff_base_s = float(opts["backoff_base_s"])
        self.backoff_max_s = float(opts["backoff_max_s"])
        self.retry_seed = int(opts["retry_seed"])
        self.send_seed = bool(opts["send_seed"])
        if config.tool_mode not in TOOL_MODES:
            raise BenchError(f"unknown tool_mode '{config.tool_mode}' "
                             f"(known: {', '.join(TOOL_MODES)})", field="backend.tool_mode")
        seed_opt = opts["seed_supported"]
        if seed_opt not in ("measure", True, False):
            raise BenchError(f"seed_supported must be measure, true or false, not '{seed_opt}'",
                             field="backend.options.seed_supported")
        self._seed_supported: bool | None = None if seed_opt == "measure" else bool(seed_opt)
        self._clients: dict[int, tuple[Any, Any, asyncio.Semaphore]] = {}
        self._headers = {"Content-Type": "application/json",
                         "Accept-Encoding": ACCEPT_ENCODING}
        self._secrets: tuple[str, ...] = ()
        key_env = opts["api_key_env"]
        if key_env:
            key = os.environ.get(str(key_env))
            if not key:
                raise BenchError(f"environment variable '{key_env}' (the API key) is not set",
                                 field="backend.options.api_key_env")
            self._headers["Authorization"] = f"Bearer {key}"
            self._secrets = (key,)
        #: attempts made per request id in the last ``generate`` call (for timings and tests)
        self.attempts: dict[str, int] = {}

    # ------------------------------------------------------------------ public
    @property
    def seed_supported(self) -> bool:
        if not self.send_seed:
            return False
        if self._seed_supported is None:
            self._seed_supported = self.measure_seed_support()
        return self._seed_supported

    def measure_seed_support(self) -> bool:
        """Same seed twice, then another seed (temperature 1): honoured iff 1 == 2 != 3."""
        probe = [GenerationRequest(
            request_id=f"seed-probe/{k}",
            messages=[{"role": "user", "content": "Write one sentence about the sea."}],
            tools=[], seed=seed, max_tokens=24, temperature=1.0)
            for k, seed in enumerate((11, 11, 12))]
        saved = self.max_retries
        self.max_retries = 0  # a dead server is "unsupported", quickly
        try:
            out = [self._run(lambda r=r: self._generate_all([r]))[0] for r in probe]
        finally:
            self.max_retries = saved
        if any(c.error for c in out):
            log.warning("seed support not measurable (%s): recorded as unsupported",
                        next(c.error for c in out if c.error))
            return False
        return out[0].text == out[1].text and out[0].text != out[2].text

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        self.attempts = {}
        if not requests:
            return []
        return self._run(lambda: self._generate_all(requests))

    async def agenerate(self, request: GenerationRequest) -> Completion:
        """One request on the caller's loop (one client and semaphore per loop)."""
        loop = asyncio.get_running_loop()
        key = id(loop)
        if key not in self._clients:
            self._clients = {k: v for k, v in self._clients.items() if not v[0].is_closed()}
            self._clients[key] = (loop, self._client(), asyncio.Semaphore(self.concurrency))
        _, client, semaphore = self._clients[key]
        return await self._one(client, semaphore, request)

    def _run(self, make: Any) -> Any:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(make())
        # Called from inside a running event loop: run ours in a worker thread.
        box: dict[str, Any] = {}

        def runner() -> None:
            box["out"] = asyncio.run(make())

        thread = threading.Thread(target=runner, name="openai-backend")
        thread.start()
        thread.join()
        return box["out"]

    def backoff_delays(self, request: GenerationRequest) -> list[float]:
        """The delays (seconds) before retries 1..max_retries of ``request``: deterministic."""
        rng = self._jitter_rng(request)
        return [self._delay(k, rng) for k in range(self.max_retries)]

    def payload(self, request: GenerationRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.config.model,
            "messages": [_http_message(m) for m in request.messages],
            "max_tokens": int(request.max_tokens),
            "temperature": float(request.temperature),
            "top_p": float(self.config.top_p),
        }
        if self.send_seed:
            body["seed"] = int(request.seed)
        if request.tool_mode == "native" and request.tools:
            body["tools"] = native_tools(request.tools)
            body["tool_choice"] = "auto"
        elif request.tool_mode == "constrained":
            # the same JSON schema vLLM's structured outputs get (models/constrained.py); no
            # ``tools``, so a final answer stays possible and the reply is our action format
            body["response_format"] = response_format(request.tools)
        return body

    def close(self) -> None:
        for loop, client, _ in self._clients.values():
            if not loop.is_closed():
                with contextlib.suppress(RuntimeError):  # the loop may have stopped
                    loop.run_until_complete(client.aclose()) if not loop.is_running() else None
        self._clients = {}

    # ------------------------------------------------------------------ internals
    def _jitter_rng(self, request: GenerationRequest) -> random.Random:
        return random.Random(f"{self.retry_seed}:{request.request_id}:{request.seed}")

    def _delay(self, retry_index: int, rng: random.Random) -> float:
        cap = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** retry_index)
        return cap * (0.5 + 0.5 * rng.random())

    def _client(self) -> Any:
        limits = httpx.Limits(max_connections=self.concurrency,
                              max_keepalive_connections=self.concurrency)
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits,
                                 headers=self._headers)

    async def _generate_all(self, requests: list[GenerationRequest]) -> list[Completion]:
        semaphore = asyncio.Semaphore(self.concurrency)
        async with self._client() as client:
            return list(await asyncio.gather(
                *(self._one(client, semaphore, req) for req in requests)))

    async def _one(self, client: Any, semaphore: asyncio.Semaphore,
                   request: GenerationRequest) -> Completion:
        t0 = time.perf_counter()
        comp = await self._attempts(client, semaphore, request)
        comp.latency_s = time.perf_counter() - t0
        if comp.error:  # formed from redacted parts already; once more, whole
            comp.error = redact(comp.error, self._secrets)
        comp.attempts = self.attempts.get(request.request_id, comp.attempts)
        comp.prompt_hash = request_hash(request, self.config.model)
        comp.tool_mode = request.tool_mode
        return comp

    async def _attempts(self, client: Any, semaphore: asyncio.Semaphore,
                        request: GenerationRequest) -> Completion:
        url = f"{self.base_url}/chat/completions"
        body = self.payload(request)
        rng = self._jitter_rng(request)
        last = "no attempt made"
        attempts = 0
        for attempt in range(self.max_retries + 1):
            retry_after = 0.0
            attempts = attempt + 1
            self.attempts[request.request_id] = attempts
            try:
                async with semaphore:
                    # the deadline covers connect, headers and every read of this attempt
                    async with asyncio.timeout(self.timeout_s):
                        reply = await read_reply(client, url, body, self.max_response_bytes,
                                                 self._secrets)
            except (TimeoutError, httpx.TimeoutException):
                last = f"no complete reply within the {self.timeout_s:g} s deadline"
            except ReplyError as exc:  # too large or undecodable: the server's doing
                return Completion(text="", error=str(exc))
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
                last = shown(f"{type(exc).__name__}: {exc}", _SNIPPET, self._secrets)
            else:
                status = reply.status
                text = shown(reply.body.decode("utf-8", "replace"), _SNIPPET, self._secrets)
                if status == 200:
                    try:
                        return parse_completion(reply, self.served_model, self._secrets)
                    except ReplyError as exc:
                        return Completion(text="", error=str(exc))
                if status in RETRY_STATUS:
                    last = f"HTTP {status}: {text}"
                    retry_after = _retry_after_s(reply.retry_after)
                elif is_context_overflow(status, reply.body):
                    return Completion(text="", error=f"context overflow: HTTP {status}: {text}")
                else:
                    return Completion(text="", error=f"HTTP {status}: {text}")
            if attempt < self.max_retries:
                delay = min(self.backoff_max_s, max(self._delay(attempt, rng), retry_after))
                log.warning("%s: %s; retry %d/%d in %.2fs", request.request_id, last,
                            attempt + 1, self.max_retries, delay)
                await asyncio.sleep(delay)
        return Completion(text="", error=f"provider failed after {attempts} attempts: {last}")


def _http_message(m: dict[str, Any]) -> dict[str, Any]:
    """A chat message as the OpenAI API wants it: tool-call arguments as a JSON string (chat
    templates, and the adapter's AgentDojo conversations, hold them as objects)."""
    calls = m.get("tool_calls")
    if not calls:
        return m
    out = []
    for c in calls:
        fn = dict(c["function"])
        if not isinstance(fn.get("arguments"), str):
            fn["arguments"] = json.dumps(fn.get("arguments") or {}, sort_keys=True)
        out.append({**c, "function": fn})
    return {**m, "tool_calls": out}


def _retry_after_s(value: str | None) -> float:
    try:
        seconds = float(value) if value else 0.0
    except ValueError:  # an HTTP date: fall back to our own backoff
        return 0.0
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0
