"""The offline vLLM engine (``vllm.LLM``): the rollout engine of the GPU jobs.

One ``generate`` call is one engine call over every pending request of every in-flight episode,
each with its own ``SamplingParams(seed=request.seed, temperature, top_p, max_tokens)``; vLLM
schedules them with continuous batching and prefix caching (episodes of one scenario share long
system prompts).

Prompts are rendered here with the model's chat template (``tokenizer.apply_chat_template`` of
the engine's own tokenizer, tools passed when the template renders them) and handed to
``llm.generate`` as token prompts, rather than through ``llm.chat``. Three reasons: ``llm.chat``
takes one ``tools`` list for the whole call, but agents of different roles carry different tool
sets and must still share one engine call; the token count is needed anyway to reject a prompt
that does not fit the context (vLLM would raise for the whole batch), so rendering once avoids
tokenizing every prompt twice; and rendering with ``tokenize=True`` never adds a second BOS token.
The rendering is the one ``llm.chat`` performs for Hugging Face tokenizers.

Seeds (paper 000, Appendix I): each request's sampler is seeded with ``request.seed``, so its
tokens do not depend on the other requests in the batch (up to batch-dependent numerics of the
forward pass, which vLLM only removes in batch-invariant mode); ``seed`` in the options seeds the
engine. Context: a request whose prompt plus ``max_tokens`` exceeds ``max_model_len`` gets
``Completion(error="context overflow: ...")`` (the rule ``vllm serve`` applies), never raises.
"""

from __future__ import annotations

from typing import Any

from containmentbench.models.base import BackendConfig, Completion, GenerationRequest
from containmentbench.models.hf import (
    context_overflow,
    render_prompt_ids,
    resolve_options,
    template_renders_tools,
)

#: option -> default; anything else in ``BackendConfig.options`` is rejected by name.
OPTIONS: dict[str, Any] = {
    "tensor_parallel_size": 1,
    "max_model_len": None,          # None = from the model config
    "enable_prefix_caching": True,
    "load_format": "auto",          # "dummy": random weights of the config's shape
    "dtype": "auto",
    "gpu_memory_utilization": 0.9,
    "seed": 0,
    "tokenizer": None,              # None = the model folder
    "trust_remote_code": False,
    "enforce_eager": False,         # skip CUDA-graph capture (faster start, slower decode)
    "max_num_seqs": None,           # None = vLLM default
    "ignore_eos": False,            # benchmarks only: always produce max_tokens tokens
}


class VLLMBackend:
    name = "vllm"
    seed_supported = True

    def __init__(self, config: BackendConfig) -> None:
        try:
            from vllm import LLM, SamplingParams
        except ImportError as exc:
            raise ImportError("the vllm backend needs the `vllm` package "
                              "(pip install 'containmentbench[gpu]')", name="vllm") from exc
        self._sampling_params = SamplingParams
        self.config = config
        opts = resolve_options(config, OPTIONS)
        self.ignore_eos = bool(opts["ignore_eos"])
        engine_args: dict[str, Any] = {
            "model": config.model,
            "tensor_parallel_size": int(opts["tensor_parallel_size"]),
            "enable_prefix_caching": bool(opts["enable_prefix_caching"]),
            "load_format": str(opts["load_format"]),
            "dtype": str(opts["dtype"]),
            "gpu_memory_utilization": float(opts["gpu_memory_utilization"]),
            "seed": int(opts["seed"]),
            "trust_remote_code": bool(opts["trust_remote_code"]),
            "enforce_eager": bool(opts["enforce_eager"]),
        }
        for key in ("max_model_len", "tokenizer", "max_num_seqs"):
            if opts[key] is not None:
                engine_args[key] = opts[key]
        self.llm = LLM(**engine_args)
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = int(self.llm.llm_engine.model_config.max_model_len)
        self._tools_ok = template_renders_tools(self.tokenizer)

    def sampling_params(self, request: GenerationRequest) -> Any:
        return self._sampling_params(
            n=1,
            seed=int(request.seed),
            temperature=float(request.temperature),
            top_p=float(self.config.top_p),
            max_tokens=int(request.max_tokens),
            ignore_eos=self.ignore_eos,
        )

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)
        prompts: list[dict[str, Any]] = []
        params: list[Any] = []
        index: list[int] = []
        for i, req in enumerate(requests):
            ids = render_prompt_ids(self.tokenizer, req, self._tools_ok)
            overflow = context_overflow(len(ids), req.max_tokens, self.max_model_len)
            if overflow:
                results[i] = Completion(text="", prompt_tokens=len(ids), error=overflow)
                continue
            prompts.append({"prompt_token_ids": ids})
            params.append(self.sampling_params(req))
            index.append(i)
        if prompts:
            outputs = self.llm.generate(prompts, params, use_tqdm=False)
            for i, out in zip(index, outputs):
                sample = out.outputs[0]
                results[i] = Completion(
                    text=sample.text,
                    prompt_tokens=len(out.prompt_token_ids or []),
                    completion_tokens=len(sample.token_ids),
                    finish_reason=sample.finish_reason,
                )
        return [r for r in results if r is not None]

    def close(self) -> None:
        self.llm = None
        try:
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover - vllm always brings torch
            pass
