"""One typed option schema per backend, checked at ``config check`` (before any job).

Each backend reads its defaults from here (``defaults(name)``), so the schema the config check
applies is the one the backend uses. Types are checked too: ``batch_size: "8"`` or a misspelt
``gpu_memory_utilisation`` fails with a one-line error naming the field, exit 2. This module
imports nothing heavy (no torch, vllm or httpx), so the check runs in the pipeline venv.
"""

from __future__ import annotations

from typing import Any

from containmentbench.errors import BenchError

_NUM = (int, float)
_OPT_STR = (str, type(None))
_OPT_INT = (int, type(None))

#: backend -> option -> (accepted types, default)
SCHEMAS: dict[str, dict[str, tuple[tuple[type, ...], Any]]] = {
    "hf": {
        "device": ((str,), "cpu"),                 # "cpu", "cuda", "cuda:1", ...
        "dtype": ((str,), "auto"),                 # "auto", "float32", "bfloat16", "float16"
        "batch_size": ((int,), 8),
        "max_input_tokens": (_OPT_INT, None),      # left-truncate longer prompts; None = no cut
        "max_model_len": (_OPT_INT, None),         # None = config.max_position_embeddings
        "trust_remote_code": ((bool,), False),
        "seed": ((int,), 0),                       # global seeds at load time
        "load_format": ((str,), "auto"),           # "auto" = the folder; "dummy" = random init
        "gguf_file": (_OPT_STR, None),             # a GGUF file in the model folder
    },
    "vllm": {
        "tensor_parallel_size": ((int,), 1),
        "max_model_len": (_OPT_INT, None),         # None = from the model config
        "enable_prefix_caching": ((bool,), True),
        "load_format": ((str,), "auto"),           # "dummy": random weights of the config's shape
        "dtype": ((str,), "auto"),
        "gpu_memory_utilization": ((float, int, type(None)), None),  # None: 0.9 GPU, 0.1 CPU
        "seed": ((int,), 0),
        "tokenizer": (_OPT_STR, None),             # None = the model folder
        "trust_remote_code": ((bool,), False),
        "enforce_eager": ((bool,), False),         # skip CUDA-graph capture
        "max_num_seqs": (_OPT_INT, None),          # None = vLLM default
        "ignore_eos": ((bool,), False),            # benchmarks only
        "tool_parser": (_OPT_STR, None),           # vLLM tool parser run beside ours
        "enable_chunked_prefill": ((bool, type(None)), None),  # None: vLLM's; False on CPU
        "max_num_batched_tokens": (_OPT_INT, None),  # None: vLLM's; max_model_len on CPU
        # KV cache size in bytes; on the CPU engine this beats gpu_memory_utilization (there a
        # share of host memory for weights AND cache together)
        "kv_cache_memory_bytes": (_OPT_INT, None),
        # the CPU engine's OpenMP cores (VLLM_CPU_OMP_THREADS_BIND): None = vLLM's own choice
        # (one core reserved for the frontend, the model on the rest: one of two cores);
        # "all" = every core this process may run on, none reserved; or vLLM's own syntax
        # ("0-1", "nobind"). Part of the shard key: the thread count can change the sums.
        "cpu_threads_bind": (_OPT_STR, None),
    },
    "openai": {
        "base_url": ((str,), "http://127.0.0.1:8000/v1"),
        "api_key_env": (_OPT_STR, None),           # NAME of the env variable holding the key
        "concurrency": ((int,), 8),                # requests in flight
        "timeout_s": (_NUM, 300.0),                # deadline of a whole attempt (all reads)
        "max_response_bytes": ((int,), 8 * 2**20),  # cap, compressed and decoded (1 KiB-64 MiB)
        "served_model": (_OPT_STR, None),          # the reply's model, if not the requested one
        "max_retries": ((int,), 4),                # retries after the first attempt
        "backoff_base_s": (_NUM, 1.0),
        "backoff_max_s": (_NUM, 60.0),
        "retry_seed": ((int,), 0),                 # seeds the jitter
        "send_seed": ((bool,), True),
        "seed_supported": ((str, bool), "measure"),  # measure | true | false
    },
    "sim": {"profile": ((str,), "default"), "latency_ms": (_NUM, 0)},
    "scripted": {"plan": ((str,), "benign")},
}


def defaults(backend: str) -> dict[str, Any]:
    return {k: v[1] for k, v in SCHEMAS[backend].items()}


def check_options(backend: str, options: dict[str, Any], prefix: str = "backend.options"
                  ) -> None:
    """Unknown option or wrong type -> BenchError naming the field."""
    schema = SCHEMAS.get(backend)
    if schema is None:
        return
    for key, value in options.items():
        if key not in schema:
            raise BenchError(f"unknown option '{key}' for backend '{backend}' "
                             f"(known: {', '.join(sorted(schema))})", field=f"{prefix}.{key}")
        types = schema[key][0]
        if isinstance(value, bool) and bool not in types:  # bool is an int subclass
            ok = False
        else:
            ok = isinstance(value, types)
        if not ok:
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise BenchError(f"option '{key}' of backend '{backend}' must be {names}, "
                             f"not {value!r}", field=f"{prefix}.{key}")
