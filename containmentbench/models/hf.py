"""Local transformers backend (CPU or one GPU): batched, left-padded, per-request seeds.

Used for small local models and for tests with a tiny random-weight model; the full-scale runs
use the vLLM engine. Prompts are rendered with the model's own chat template (tools passed when
the template renders them), batched with LEFT padding so every row's last prompt token sits at
the same position, and decoded with one ``model.generate`` call per batch.

Seeds (paper 000, Appendix I). Python, NumPy, torch and (when present) CUDA global seeds are set
from ``options.seed`` at load time and from the batch's first request seed before each call.
Sampling itself does not use the global torch RNG: each sampled row owns a ``torch.Generator``
seeded with its own ``request.seed``, and a logits processor draws one Gumbel vector of vocabulary
size per row per step from it. Taking the argmax of ``logits / T + Gumbel`` (after the top-p cut)
is an exact draw from the tempered, nucleus-truncated distribution (the Gumbel-max trick), so
greedy decoding of the perturbed scores samples, and a request's tokens depend only on its own
seed and prompt -- not on which other requests share its batch or in which order. Cost: one
``vocab``-sized uniform draw plus a sort (only when ``top_p < 1``) per sampled row per step, done
in a Python loop over rows; small next to the forward pass, and it keeps sampled requests batched
instead of running them one at a time under a reseeded global RNG. Greedy (temperature 0) and
sampled requests share batches. Bit-identical results across different batch compositions still
assume the forward pass is row-independent; on CPU float32 it is in practice, on GPU with
reduced precision a near tie can occasionally flip.

Context: a prompt longer than ``max_input_tokens`` is cut from the LEFT (the newest turns are
kept) and the cut is reported (``warning`` field when ``Completion`` has one, a log warning and
``HFBackend.truncations`` always). A request whose prompt plus ``max_tokens`` exceeds the model's
context gets ``Completion(error="context overflow: ...")`` -- the same rule an OpenAI-compatible
server applies -- and never raises.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import fields, replace
from typing import Any

from containmentbench.errors import BenchError
from containmentbench.models.base import (
    TOOL_MODES,
    BackendConfig,
    Completion,
    GenerationRequest,
    native_tools,
    prompt_hash,
)
from containmentbench.models.options import SCHEMAS, check_options, defaults
from containmentbench.models.templates import native_error, renders_tools

log = logging.getLogger(__name__)

#: option -> default (typed schema: containmentbench.models.options)
OPTIONS: dict[str, Any] = defaults("hf")

_DTYPES = {"float32": "float32", "fp32": "float32", "bfloat16": "bfloat16", "bf16": "bfloat16",
           "float16": "float16", "fp16": "float16", "half": "float16"}
_HAS_WARNING_FIELD = any(f.name == "warning" for f in fields(Completion))


def resolve_options(config: BackendConfig, defaults: dict[str, Any]) -> dict[str, Any]:
    """Merge ``config.options`` over ``defaults``; an unknown option is an error naming it."""
    if config.name in SCHEMAS:
        check_options(config.name, dict(config.options))
    unknown = sorted(set(config.options) - set(defaults))
    if unknown:
        raise BenchError(f"unknown option(s) {unknown} for backend '{config.name}' "
                         f"(known: {', '.join(sorted(defaults))})",
                         field=f"backend.options.{unknown[0]}")
    return {**defaults, **config.options}


def seed_everything(seed: int) -> None:
    """Set the Python, NumPy, torch and (if available) CUDA global seeds (Appendix I)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def template_renders_tools(tokenizer: Any) -> bool:
    """Whether the tokenizer's chat template references ``tools`` (so passing them is safe)."""
    return renders_tools(getattr(tokenizer, "chat_template", None))


def check_tool_mode(config: BackendConfig, tokenizer: Any, constrains: bool = False) -> None:
    """A bad tool mode, ``native`` with a template that cannot render tools, or
    ``constrained`` on a backend that cannot constrain: one-line error. Called with the
    tokenizer only, before any weights or engine load."""
    if config.tool_mode not in TOOL_MODES:
        raise BenchError(f"unknown tool_mode '{config.tool_mode}' (known: {', '.join(TOOL_MODES)})",
                         field="backend.tool_mode")
    if config.tool_mode == "native" and not template_renders_tools(tokenizer):
        raise native_error(config.model)
    if config.tool_mode == "constrained" and not constrains:
        raise BenchError(f"backend '{config.name}' cannot constrain decoding (tool_mode "
                         f"constrained needs vllm or openai)", field="backend.tool_mode")


#: every role the runtime sends, in the order a multi-agent episode can produce them
_PROBE = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
          {"role": "assistant", "content": "a"}, {"role": "user", "content": "u"}]


def check_template(config: BackendConfig, tokenizer: Any) -> None:
    """Render a probe conversation once at load: a template that rejects a role (e.g. one
    without a system turn) is a one-line error before any rollout, not a crash mid-shard."""
    try:
        tokenizer.apply_chat_template(_PROBE, add_generation_prompt=True, tokenize=False)
    except Exception as exc:  # jinja2 TemplateError and friends (raise_exception in templates)
        msg = " ".join(str(exc).split())[:200]
        raise BenchError(f"the chat template of '{config.model}' rejects the runtime's "
                         f"conversation (system/user/assistant roles): {msg}",
                         field="model") from None


def render_prompt_ids(tokenizer: Any, request: GenerationRequest, tools_ok: bool = True
                      ) -> list[int]:
    """Token ids of ``request`` rendered with the model's chat template, generation prompt added.

    Tool mode ``prompt``: no ``tools`` to the template (the schemas are in the system prompt
    once). ``native``: the template renders them, in the ``{"type": "function"}`` form.
    """
    native = request.tool_mode == "native" and bool(request.tools) and tools_ok
    encoded = tokenizer.apply_chat_template(
        request.messages,
        tools=native_tools(request.tools) if native else None,
        add_generation_prompt=True,
        tokenize=True,
        return_dict=True,
    )
    ids = encoded["input_ids"] if hasattr(encoded, "keys") else encoded
    if ids and isinstance(ids[0], list):  # some versions batch a single conversation
        ids = ids[0]
    return [int(t) for t in ids]


def context_overflow(prompt_tokens: int, max_tokens: int, context: int) -> str | None:
    if prompt_tokens + max_tokens > context:
        return (f"context overflow: prompt has {prompt_tokens} tokens + max_tokens {max_tokens} "
                f"> context length {context}")
    return None


class HFBackend:
    name = "hf"
    seed_supported = True

    def __init__(self, config: BackendConfig) -> None:
        import torch
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

        from containmentbench.models.weights import dtype_keyword, local_model_dir

        opts = resolve_options(config, OPTIONS)
        config = replace(config, model=local_model_dir(config.model))
        self.config = config
        self.device = str(opts["device"])
        if self.device.startswith("cuda") and not torch.cuda.is_available():
            raise BenchError(f"device '{self.device}' but no CUDA device is available here "
                             f"(set backend.options.device=cpu)", field="backend.options.device")
        self.batch_size = int(opts["batch_size"])
        if self.batch_size < 1:
            raise BenchError("batch_size must be >= 1", field="backend.options.batch_size")
        self.max_input_tokens = opts["max_input_tokens"]
        self.truncations: dict[str, str] = {}
        trust = bool(opts["trust_remote_code"])
        seed_everything(int(opts["seed"]))

        dtype_name = str(opts["dtype"])
        if dtype_name == "auto":
            dtype: Any = "auto"
        elif dtype_name in _DTYPES:
            dtype = getattr(torch, _DTYPES[dtype_name])
        else:
            raise BenchError(f"unknown dtype '{dtype_name}' (known: auto, {', '.join(_DTYPES)})",
                             field="backend.options.dtype")

        gguf = {"gguf_file": str(opts["gguf_file"])} if opts["gguf_file"] else {}
        self.tokenizer = AutoTokenizer.from_pretrained(config.model, trust_remote_code=trust,
                                                       **gguf)
        if not getattr(self.tokenizer, "chat_template", None):
            raise BenchError(f"model '{config.model}' has no chat template", field="model")
        check_tool_mode(config, self.tokenizer)
        check_template(config, self.tokenizer)
        self._tools_ok = template_renders_tools(self.tokenizer)

        dtype_kw = dtype_keyword()
        if opts["load_format"] == "dummy":
            # Random weights from the config alone (mirrors vLLM's load_format="dummy"), for
            # throughput checks of full-size shapes without downloading weights.
            model_config = AutoConfig.from_pretrained(config.model, trust_remote_code=trust)
            init_dtype = torch.bfloat16 if dtype == "auto" else dtype
            with torch.device(self.device):  # initialise on the device: no host copy of 7B
                self.model = AutoModelForCausalLM.from_config(
                    model_config, trust_remote_code=trust, **{dtype_kw: init_dtype})
            self.model.to(self.device)
        elif opts["load_format"] == "auto":
            if gguf and dtype == "auto":  # GGUF weights are dequantised; float32 on CPU
                dtype = torch.float32
            self.model = AutoModelForCausalLM.from_pretrained(
                config.model, trust_remote_code=trust, **gguf, **{dtype_kw: dtype}
            ).to(self.device)
        else:
            raise BenchError(f"unknown load_format '{opts['load_format']}' (known: auto, dummy)",
                             field="backend.options.load_format")
        self.model.eval()

        self.context_length = int(opts["max_model_len"] or
                                  getattr(self.model.config, "max_position_embeddings", 0) or
                                  getattr(self.tokenizer, "model_max_length", 2048))
        gen_eos = self.model.generation_config.eos_token_id
        eos = set(gen_eos if isinstance(gen_eos, list) else [gen_eos] if gen_eos is not None else [])
        if self.tokenizer.eos_token_id is not None:
            eos.add(self.tokenizer.eos_token_id)
        if not eos:
            raise BenchError(f"model '{config.model}' defines no eos token", field="model")
        self.eos_ids = sorted(int(e) for e in eos)
        pad = self.tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])

    # ------------------------------------------------------------------ generation
    def generate(self, requests: list[GenerationRequest]) -> list[Completion]:
        results: list[Completion | None] = [None] * len(requests)
        if not requests:
            return []
        seed_everything(int(requests[0].seed))
        ready: list[tuple[int, list[int], str | None]] = []
        hashes: list[str] = []
        for i, req in enumerate(requests):
            ids = render_prompt_ids(self.tokenizer, req, self._tools_ok)
            hashes.append(prompt_hash(ids))
            warning = None
            if self.max_input_tokens is not None and len(ids) > int(self.max_input_tokens):
                keep = int(self.max_input_tokens)
                warning = f"prompt truncated from the left: {len(ids)} -> {keep} tokens"
                log.warning("%s: %s", req.request_id, warning)
                self.truncations[req.request_id] = warning
                ids = ids[-keep:]
            overflow = context_overflow(len(ids), req.max_tokens, self.context_length)
            if overflow:
                results[i] = Completion(text="", prompt_tokens=len(ids), error=overflow,
                                        finish_reason="length")
            else:
                ready.append((i, ids, warning))

        # Similar lengths together: less padding. Results do not depend on the grouping.
        ready.sort(key=lambda item: len(item[1]))
        for start in range(0, len(ready), self.batch_size):
            chunk = ready[start:start + self.batch_size]
            batch = [requests[i] for i, _, _ in chunk]
            t0 = time.perf_counter()
            try:
                outs = self._generate_batch(batch, [ids for _, ids, _ in chunk])
            except Exception as exc:  # e.g. CUDA out of memory: end these rollouts, not the job
                if type(exc).__name__ != "OutOfMemoryError":
                    raise
                outs = [Completion(text="", error=f"hf generation failed: {exc}") for _ in chunk]
            latency = time.perf_counter() - t0
            for (i, _, warning), out in zip(chunk, outs):
                if warning and _HAS_WARNING_FIELD:
                    out.warning = warning  # type: ignore[attr-defined]
                out.latency_s = latency
                results[i] = out
        done = [r for r in results if r is not None]
        for req, comp, h in zip(requests, done, hashes):
            comp.prompt_hash, comp.tool_mode = h, req.tool_mode
        return done

    def _generate_batch(self, batch: list[GenerationRequest],
                        prompts: list[list[int]]) -> list[Completion]:
        import torch
        from transformers import GenerationConfig, LogitsProcessorList, StoppingCriteriaList

        width = max(len(p) for p in prompts)
        input_ids = torch.full((len(prompts), width), self.pad_id, dtype=torch.long)
        attention = torch.zeros((len(prompts), width), dtype=torch.long)
        for row, ids in enumerate(prompts):  # LEFT padding
            input_ids[row, width - len(ids):] = torch.tensor(ids, dtype=torch.long)
            attention[row, width - len(ids):] = 1
        budgets = [int(r.max_tokens) for r in batch]
        gen_config = GenerationConfig(
            max_new_tokens=max(budgets), do_sample=False, num_beams=1,
            eos_token_id=self.eos_ids, pad_token_id=self.pad_id,
            temperature=None, top_p=None, top_k=None,
        )
        processors = LogitsProcessorList()
        if any(r.temperature > 0 for r in batch):
            processors.append(_PerRowGumbelSampler(
                temperatures=[float(r.temperature) for r in batch],
                seeds=[int(r.seed) for r in batch],
                top_p=float(self.config.top_p), device=self.device))
        with torch.inference_mode():
            out = self.model.generate(
                input_ids=input_ids.to(self.device),
                attention_mask=attention.to(self.device),
                generation_config=gen_config,
                logits_processor=processors,
                stopping_criteria=StoppingCriteriaList([_RowBudget(width, budgets)]),
            )
        new = out[:, width:].tolist()
        eos = set(self.eos_ids)
        completions = []
        for row, (tokens, budget) in enumerate(zip(new, budgets)):
            tokens = tokens[:budget]
            stop = next((k for k, t in enumerate(tokens) if t in eos), None)
            if stop is not None:
                tokens, finish = tokens[:stop + 1], "stop"
            else:
                finish = "length"
            text = self.tokenizer.decode([t for t in tokens if t not in eos],
                                         skip_special_tokens=True)
            completions.append(Completion(text=text, prompt_tokens=len(prompts[row]),
                                          completion_tokens=len(tokens), finish_reason=finish))
        return completions

    def close(self) -> None:
        import torch

        self.model = None
        if torch.cuda.is_available():
            torch.cuda.empty_cache()


def _row_budget_cls():
    from transformers import StoppingCriteria

    class RowBudget(StoppingCriteria):
        """Per-row stop once a row has produced its own ``max_tokens`` (others keep going)."""

        def __init__(self, prompt_width: int, budgets: list[int]) -> None:
            self.prompt_width = prompt_width
            self.budgets = budgets

        def __call__(self, input_ids, scores, **kwargs):
            import torch

            produced = input_ids.shape[1] - self.prompt_width
            return torch.tensor([produced >= b for b in self.budgets], dtype=torch.bool,
                                device=input_ids.device)

    return RowBudget


def _gumbel_sampler_cls():
    from transformers import LogitsProcessor

    class PerRowGumbelSampler(LogitsProcessor):
        """Turn greedy decoding into per-row seeded sampling (Gumbel-max trick).

        Rows with temperature 0 pass through unchanged (greedy). For a sampled row the scores
        become ``top_p_cut(logits / T) + G`` with ``G = -log(-log U)``, ``U ~ Uniform(0, 1)``
        drawn from the row's own generator, so ``argmax`` is a sample from ``softmax``.
        """

        def __init__(self, temperatures: list[float], seeds: list[int], top_p: float,
                     device: str) -> None:
            import torch

            self.temperatures = temperatures
            self.top_p = top_p
            self.generators = []
            for temp, seed in zip(temperatures, seeds):
                if temp > 0:
                    gen = torch.Generator(device=device)
                    gen.manual_seed(seed)
                    self.generators.append(gen)
                else:
                    self.generators.append(None)

        def __call__(self, input_ids, scores):
            import torch

            out = scores.clone()
            tiny = torch.finfo(torch.float32).tiny
            for row, gen in enumerate(self.generators):
                if gen is None:
                    continue
                logits = scores[row].float() / self.temperatures[row]
                if self.top_p < 1.0:
                    logits = _top_p_cut(logits, self.top_p)
                uniform = torch.rand(logits.shape, generator=gen, device=logits.device,
                                     dtype=torch.float32).clamp_(min=tiny)
                out[row] = (logits - torch.log(-torch.log(uniform))).to(out.dtype)
            return out

    return PerRowGumbelSampler


def _top_p_cut(logits, top_p: float):
    """Keep the smallest set of tokens whose probability reaches ``top_p`` (the top one always)."""
    import torch

    sorted_logits, order = torch.sort(logits, descending=True)
    probs = sorted_logits.softmax(-1)
    before = probs.cumsum(-1) - probs  # mass strictly above each token
    sorted_logits = sorted_logits.masked_fill(before >= top_p, float("-inf"))
    return torch.empty_like(logits).scatter_(0, order, sorted_logits)


class _Lazy:
    """Build a transformers subclass on first use, so importing this module stays light."""

    def __init__(self, factory) -> None:
        self.factory = factory
        self.cls = None

    def __call__(self, *args, **kwargs):
        if self.cls is None:
            self.cls = self.factory()
        return self.cls(*args, **kwargs)


_RowBudget = _Lazy(_row_budget_cls)
_PerRowGumbelSampler = _Lazy(_gumbel_sampler_cls)
