"""The model-backend interface and its registry.

A backend turns a batch of chat requests into completions. The runtime's lockstep driver
sends every pending request of every in-flight episode in one ``generate`` call per tick
(one engine call for the vLLM backend). A backend may also offer
``async def agenerate(request) -> Completion`` (vllm, openai): the asynchronous driver then runs
every episode as its own task, so an episode's next request joins the engine's running batch as
soon as its previous completion returns. Heavy packages (vllm, torch, transformers) are imported
only inside the backend that needs them (registry entries are import paths).

Tool mode (one prompt per model, the same on every backend): ``prompt`` -- our action format and
the tool schemas once, in the system prompt; the chat template gets no ``tools`` --,
``native`` -- the model's own chat template renders the tools (``{"type": "function", ...}``
form; the OpenAI ``tools`` field over HTTP) and the system prompt carries no schemas -- or
``constrained`` -- the prompt of ``prompt`` mode, with decoding constrained to a JSON schema
of the request's tools plus a final-answer option (:mod:`containmentbench.models.constrained`;
vLLM's structured outputs, ``response_format`` over HTTP). The mode is part of the shard key
and of every ``model_call`` event, so results of two modes are never pooled. Every
completion records the mode and a SHA-256 of the exact prompt the model saw.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from dataclasses import dataclass, field
from typing import Any, Protocol

from containmentbench.errors import BenchError


@dataclass(slots=True)
class GenerationRequest:
    """One chat completion request of one agent at one step of one episode."""

    request_id: str                    # stable: "<rollout_id>/<agent instance>/<step>"
    messages: list[dict[str, str]]     # [{"role": "system"|"user"|"assistant", "content": ...}]
    tools: list[dict[str, Any]]        # tool schemas (name, description, parameters)
    seed: int                          # per-request seed derived from the rollout seed
    max_tokens: int = 512
    temperature: float = 0.0
    sim: Any = None                    # simulated-agent context; real backends ignore it
    tool_mode: str = "prompt"          # prompt | native | constrained (module docstring)


TOOL_MODES = ("prompt", "native", "constrained")


@dataclass(slots=True)
class Completion:
    """One model call's result and its record (paper 000 Appendix I: what the model saw)."""

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None           # set when the provider failed after its retries
    finish_reason: str | None = None   # stop | length | ... (tells truncated from malformed)
    prompt_hash: str | None = None     # sha256 of the rendered prompt (text or token ids)
    tool_mode: str | None = None       # prompt | native | constrained
    latency_s: float = 0.0             # wall clock of the call (timings only, never hashed)
    attempts: int = 1                  # provider attempts (retries + 1)
    native_calls: str | None = None    # vLLM's own tool parser on ``text`` (canonical JSON)
    served_model: str | None = None    # the reply's ``model`` (HTTP providers; checked there)
    #: prompt tokens served from the engine's prefix cache, where the engine says (vLLM's
    #: ``num_cached_tokens``; an HTTP reply's ``usage.prompt_tokens_details.cached_tokens``);
    #: None where it does not. Wall-clock-like (depends on what ran before): throughput
    #: only (pipeline/throughput.py), never in a trace
    cached_tokens: int | None = None


def defense_echo(req: GenerationRequest) -> Completion | None:
    """A defense's own model call (``sim=("defense", layer)``, runtime/episode.py) answered
    by a backend that has no model (sim, scripted): the request's user messages echoed (a
    tool filter then keeps every tool it listed). None for any other request."""
    if not (isinstance(req.sim, tuple) and req.sim[:1] == ("defense",)):
        return None
    text = "\n".join(m["content"] for m in req.messages if m["role"] == "user")
    return Completion(text, prompt_tokens=sum(len(m["content"]) for m in req.messages) // 4,
                      completion_tokens=len(text) // 4, finish_reason="stop")


def call_record(c: Completion) -> dict[str, Any]:
    """The per-call fields of a ``model_call`` trace event (latency goes to timings only)."""
    return {"prompt_hash": c.prompt_hash, "tool_mode": c.tool_mode,
            "finish_reason": c.finish_reason, "call_prompt_tokens": c.prompt_tokens,
            "call_completion_tokens": c.completion_tokens, "attempts": c.attempts,
            "provider_error": c.error, "native_calls": c.native_calls}


def native_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas in the OpenAI ``{"type": "function", "function": {...}}`` form."""
    return [{"type": "function", "function": t} for t in tools]


def prompt_hash(rendered: str | list[int]) -> str:
    """SHA-256 of a rendered prompt: its text, or its token ids as canonical JSON."""
    data = rendered if isinstance(rendered, str) else json.dumps([int(t) for t in rendered],
                                                                 separators=(",", ":"))
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def request_hash(request: GenerationRequest, model: str) -> str:
    """Hash of what an HTTP provider renders (messages, tools when native, the response format
    when constrained, model): the server renders the template, so this plus the model's
    template rebuilds the prompt."""
    body = {"model": model, "messages": request.messages,
            "tools": native_tools(request.tools) if request.tool_mode == "native" else None}
    if request.tool_mode == "constrained":
        from containmentbench.models.constrained import response_format

        body["response_format"] = response_format(request.tools)
    return prompt_hash(json.dumps(body, sort_keys=True, separators=(",", ":")))


@dataclass(slots=True)
class BackendConfig:
    """Backend settings (filled from the Hydra ``backend`` and ``model`` groups)."""

    name: str
    model: str                          # model id, local path, or sim profile label
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)
    tool_mode: str = "prompt"


class ModelBackend(Protocol):
    name: str
    #: whether the provider honours a per-request seed (Appendix I: a provider without seed
    #: support is recorded as unsupported, never treated as deterministic)
    seed_supported: bool

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]: ...

    # optional: ``async def agenerate(self, request: GenerationRequest) -> Completion``

    def close(self) -> None: ...


# name -> "module:factory"; the factory takes a BackendConfig and returns a ModelBackend.
REGISTRY: dict[str, str] = {
    "sim": "containmentbench.models.sim:SimBackend",
    "scripted": "containmentbench.models.scripted:ScriptedBackend",
    "hf": "containmentbench.models.hf:HFBackend",
    "openai": "containmentbench.models.openai_backend:OpenAIBackend",
    "vllm": "containmentbench.models.vllm_backend:VLLMBackend",
}


def make_backend(config: BackendConfig) -> ModelBackend:
    try:
        target = REGISTRY[config.name]
    except KeyError:
        raise BenchError(f"unknown backend '{config.name}' (known: {', '.join(sorted(REGISTRY))})",
                         field="backend") from None
    module, attr = target.split(":")
    try:
        return getattr(importlib.import_module(module), attr)(config)
    except ImportError as exc:
        raise BenchError(f"backend '{config.name}' needs an optional package: {exc.name} "
                         f"(install the matching extra, e.g. pip install "
                         f"'containmentbench[{ {'vllm': 'gpu', 'hf': 'hf'}.get(config.name, config.name)}]')",
                         field="backend") from None
