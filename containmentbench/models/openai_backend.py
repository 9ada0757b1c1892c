"""Backend for any OpenAI-compatible chat server (``vllm serve``, ``transformers serve``, hosted).

One ``generate`` call sends every request concurrently (one event loop, one ``httpx.AsyncClient``,
at most ``concurrency`` requests in flight) to ``POST {base_url}/chat/completions``.

Errors never raise. Timeouts, connection errors, HTTP 408, 429 and 5xx are retried up to
``max_retries`` times with exponential backoff and jitter; the jitter comes from a
``random.Random`` seeded by (``retry_seed``, request id, request seed), so the delays a request
would wait are the same on every run, whatever the interleaving. After the last retry, on a
context-length rejection (HTTP 400/413 whose body mentions context or length) or on any other
4xx, that request gets ``Completion(error=...)`` and the runtime ends its rollout with status
``error``; the other requests of the batch are unaffected.

Seeds (paper 000, Appendix I): ``seed`` is sent per request when ``send_seed`` is true.
``seed_supported`` records whether the provider honours it -- set the option to false for a
provider that ignores seeds (many hosted APIs); it is false whenever ``send_seed`` is false. The
value is recorded in every rollout row (``provider_seed_supported``); it is never assumed.

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
import os
import random
import re
import threading
from typing import Any

import httpx  # the `openai` extra; light, and a missing one is reported by make_backend

from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig, Completion, GenerationRequest
from containmentbench.models.hf import resolve_options

log = logging.getLogger(__name__)

#: Snakemake custom resource that throttles jobs sharing one server (``resources: api_calls=1``).
SNAKEMAKE_RESOURCE = "api_calls"

#: option -> default; anything else in ``BackendConfig.options`` is rejected by name.
OPTIONS: dict[str, Any] = {
    "base_url": "http://127.0.0.1:8000/v1",
    "api_key_env": None,        # NAME of the environment variable holding the key; None = no key
    "concurrency": 8,           # requests in flight per generate call
    "timeout_s": 300.0,         # per attempt
    "max_retries": 4,           # retries after the first attempt
    "backoff_base_s": 1.0,      # delay before retry k: min(max, base * 2**k) * U(0.5, 1)
    "backoff_max_s": 60.0,
    "retry_seed": 0,            # seeds the jitter
    "send_seed": True,
    "seed_supported": True,     # does the provider honour `seed`? recorded, not assumed
    "send_tools": False,        # send tool schemas (OpenAI function format, tool_choice "none")
}

RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504, 520, 521, 522, 523, 524, 529})
_CONTEXT_STATUS = frozenset({400, 413})
_CONTEXT_WORDS = re.compile(r"context|length|too long|too many tokens", re.IGNORECASE)


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
        self.max_retries = int(opts["max_retries"])
        self.backoff_base_s = float(opts["backoff_base_s"])
        self.backoff_max_s = float(opts["backoff_max_s"])
        self.retry_seed = int(opts["retry_seed"])
        self.send_seed = bool(opts["send_seed"])
        self.send_tools = bool(opts["send_tools"])
        self.seed_supported = bool(opts["seed_supported"]) and self.send_seed
        self._headers = {"Content-Type": "application/json"}
        key_env = opts["api_key_env"]
        if key_env:
            key = os.environ.get(str(key_env))
            if not key:
                raise BenchError(f"environment variable '{key_env}' (the API key) is not set",
                                 field="backend.options.api_key_env")
            self._headers["Authorization"] = f"Bearer {key}"
        #: attempts made per request id in the last ``generate`` call (for timings and tests)
        self.attempts: dict[str, int] = {}

    # ------------------------------------------------------------------ public
    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        self.attempts = {}
        if not requests:
            return []
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self._generate_all(requests))
        # Called from inside a running event loop: run ours in a worker thread.
        box: dict[str, Any] = {}

        def runner() -> None:
            box["out"] = asyncio.run(self._generate_all(requests))

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
            "messages": request.messages,
            "max_tokens": int(request.max_tokens),
            "temperature": float(request.temperature),
            "top_p": float(self.config.top_p),
        }
        if self.send_seed:
            body["seed"] = int(request.seed)
        if self.send_tools and request.tools:
            body["tools"] = [{"type": "function", "function": tool} for tool in request.tools]
            body["tool_choice"] = "none"  # render the schemas, answer in text
        return body

    def close(self) -> None:
        pass

    # ------------------------------------------------------------------ internals
    def _jitter_rng(self, request: GenerationRequest) -> random.Random:
        return random.Random(f"{self.retry_seed}:{request.request_id}:{request.seed}")

    def _delay(self, retry_index: int, rng: random.Random) -> float:
        cap = min(self.backoff_max_s, self.backoff_base_s * 2.0 ** retry_index)
        return cap * (0.5 + 0.5 * rng.random())

    async def _generate_all(self, requests: list[GenerationRequest]) -> list[Completion]:
        semaphore = asyncio.Semaphore(self.concurrency)
        limits = httpx.Limits(max_connections=self.concurrency,
                              max_keepalive_connections=self.concurrency)
        async with httpx.AsyncClient(timeout=httpx.Timeout(self.timeout_s), limits=limits,
                                     headers=self._headers) as client:
            return list(await asyncio.gather(
                *(self._one(client, semaphore, req) for req in requests)))

    async def _one(self, client: Any, semaphore: asyncio.Semaphore,
                   request: GenerationRequest) -> Completion:
        url = f"{self.base_url}/chat/completions"
        body = self.payload(request)
        rng = self._jitter_rng(request)
        last = "no attempt made"
        attempts = 0
        for attempt in range(self.max_retries + 1):
            retry_after = 0.0
            attempts = attempt + 1
            try:
                async with semaphore:
                    response = await client.post(url, json=body)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}".strip()
            else:
                status = response.status_code
                text = response.text
                if status == 200:
                    self.attempts[request.request_id] = attempts
                    return _parse_completion(text)
                if status in RETRY_STATUS:
                    last = f"HTTP {status}: {_short(text)}"
                    retry_after = _retry_after_s(response.headers.get("retry-after"))
                else:
                    self.attempts[request.request_id] = attempts
                    if status in _CONTEXT_STATUS and _CONTEXT_WORDS.search(text):
                        return Completion(text="", error=f"context overflow: HTTP {status}: "
                                                         f"{_short(text)}")
                    return Completion(text="", error=f"HTTP {status}: {_short(text)}")
            if attempt < self.max_retries:
                delay = min(self.backoff_max_s, max(self._delay(attempt, rng), retry_after))
                log.warning("%s: %s; retry %d/%d in %.2fs", request.request_id, last,
                            attempt + 1, self.max_retries, delay)
                await asyncio.sleep(delay)
        self.attempts[request.request_id] = attempts
        return Completion(text="", error=f"provider failed after {attempts} attempts: {last}")


def _parse_completion(text: str) -> Completion:
    try:
        data = json.loads(text)
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        return Completion(text="", error=f"malformed response: {_short(text)}")
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if calls:  # a server that emitted structured calls anyway: keep them as JSON text
        rendered = []
        for call in calls:
            fn = call.get("function") or {}
            args = fn.get("arguments")
            with contextlib.suppress(ValueError):  # keep unparsable arguments as text
                args = json.loads(args) if isinstance(args, str) else args
            rendered.append(json.dumps({"tool": fn.get("name"), "args": args}, sort_keys=True))
        content = "\n".join([content, *rendered]) if content else "\n".join(rendered)
    usage = data.get("usage") or {}
    return Completion(text=content,
                      prompt_tokens=int(usage.get("prompt_tokens") or 0),
                      completion_tokens=int(usage.get("completion_tokens") or 0),
                      finish_reason=choice.get("finish_reason"))


def _retry_after_s(value: str | None) -> float:
    try:
        return max(0.0, float(value)) if value else 0.0
    except ValueError:  # an HTTP date: fall back to our own backoff
        return 0.0


def _short(text: str, limit: int = 300) -> str:
    return " ".join(text.split())[:limit]
