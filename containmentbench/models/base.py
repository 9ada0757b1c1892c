"""The model-backend interface and its registry.

A backend turns a batch of chat requests into completions. The runtime's lockstep driver
sends every pending request of every in-flight episode in one ``generate`` call per tick
(one ``vllm.LLM.chat`` call for the vLLM backend). Heavy packages (vllm, torch, transformers)
are imported only inside the backend that needs them (registry entries are import paths).
"""

from __future__ import annotations

import importlib
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


@dataclass(slots=True)
class Completion:
    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str | None = None           # set when the provider failed after its retries
    finish_reason: str | None = None


@dataclass(slots=True)
class BackendConfig:
    """Backend settings (filled from the Hydra ``backend`` and ``model`` groups)."""

    name: str
    model: str                          # model id, local path, or sim profile label
    max_tokens: int = 512
    temperature: float = 0.0
    top_p: float = 1.0
    options: dict[str, Any] = field(default_factory=dict)


class ModelBackend(Protocol):
    name: str
    #: whether the provider honours a per-request seed (Appendix I: a provider without seed
    #: support is recorded as unsupported, never treated as deterministic)
    seed_supported: bool

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]: ...

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
