"""Provenance-audit cost per execution unit (one rollout), on CPU (issue 14, "Speed").

Paper 001 §5.5 reports 0.25 s of audit per execution unit; the target here is at most 25 ms
with batched embeddings. Measured side by side in one run, on rollouts of the labelled suite
(sim agent, every pair scored by all four tiers: the worst case, no early stop):

1. DCPG + Tiers 1-2 (no model);
2. Tiers 3-4 with batched MiniLM embeddings (batch 64, fresh cache) and, on the same texts,
   one text per forward pass (batch 1, fresh cache): the batching ratio;
3. the audit of a real study run directory (early stop: only pairs without Tier 1-2 evidence
   are embedded), when ``--run-dir`` is given;
4. counterfactual replays, counted separately (per replay and per unit).

Model loading is reported apart (once per process).

    python bench/audit_speed.py [--every 4] [--run-dir results/smoke]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

PAPER_S = 0.25
TARGET_S = 0.025


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--every", type=int, default=4, help="every n-th suite scenario")
    ap.add_argument("--run-dir", type=Path, default=None)
    args = ap.parse_args()

    from containmentbench.audit.auditor import collect, embed, original_calls, probe_sinks
    from containmentbench.audit.embed import Embedder
    from containmentbench.audit.policy import load_audit_policy
    from containmentbench.audit.replay import Replayer
    from containmentbench.models.base import BackendConfig, make_backend
    from containmentbench.policies import load_policy
    from containmentbench.runtime.driver import ShardContext, run_episodes
    from containmentbench.runtime.episode import RolloutSpec, RuntimeConfig
    from containmentbench.scenarios.manifest import load_suite

    pol = load_audit_policy()
    scen = load_suite(ROOT / "scenarios" / "taintbench")[:: args.every]
    cfg, defense, prof = RuntimeConfig(), load_policy("none"), "always_follow"
    backend = make_backend(BackendConfig(name="sim", model="sim", options={"profile": prof}))
    eps, _, _ = run_episodes(scen, defense, backend,
                             ShardContext("bench", "sim", "sim", "none", 0, prof), cfg)
    eps = [e for e in eps if e is not None]
    n = len(eps)
    print(f"{n} rollouts of the labelled suite (sim agent, harness validation)")

    t = time.perf_counter()
    per = []
    for ep in eps:
        events = [dict(e, labels=sorted(lab)) for e, lab in zip(ep.rec.events, ep.rec.labels)]
        edges = [{"src": a, "dst": b, "kind": k} for a, b, k, _ in ep.rec.edges]
        row = {"rollout_id": ep.spec.rollout_id}
        per.append((ep, events, collect(row, events, edges, pol)[1]))
    t_cheap = time.perf_counter() - t

    t = time.perf_counter()
    emb = Embedder(batch_size=64)
    emb._load()
    t_load = time.perf_counter() - t
    sinks = [s for _, _, ss in per for s in ss]
    t = time.perf_counter()
    embed(sinks, emb, pol, everything=True)
    t_batched = time.perf_counter() - t
    texts = emb.encoded

    one = Embedder(batch_size=1)
    one.model, one.tok, one.torch = emb.model, emb.tok, emb.torch
    t = time.perf_counter()
    embed(sinks, one, pol, everything=True)
    t_single = time.perf_counter() - t

    t = time.perf_counter()
    replays = 0
    for ep, events, ss in per:
        rep = Replayer(ep.s, defense, RolloutSpec(ep.spec.rollout_id, "bench", "sim", "sim",
                                                 "none", 0, prof), cfg, backend, pol.sinks)
        probe_sinks(ss, rep, original_calls(events, pol.sinks), pol.thresholds, True)
        replays += rep.replays
    t_replay = time.perf_counter() - t

    unit = (t_cheap + t_batched) / n
    print(f"model load (once per process): {t_load:.1f} s")
    print(f"DCPG + tiers 1-2:            {1000 * t_cheap / n:7.2f} ms/unit")
    print(f"tiers 3-4 batched (64):      {1000 * t_batched / n:7.2f} ms/unit "
          f"({texts} texts, {1000 * t_batched / max(texts, 1):.1f} ms/text)")
    print(f"tiers 3-4 one text per pass: {1000 * t_single / n:7.2f} ms/unit  "
          f"-> batching speed-up x{t_single / max(t_batched, 1e-9):.2f}")
    print(f"audit per unit (worst case): {1000 * unit:7.2f} ms  vs paper {1000 * PAPER_S:.0f} "
          f"ms: x{PAPER_S / unit:.1f} faster; target {1000 * TARGET_S:.0f} ms: "
          f"{'met' if unit <= TARGET_S else 'NOT met'} (ratio {unit / TARGET_S:.2f})")
    print(f"replays (separate):          {replays} replays, {replays / n:.2f}/unit, "
          f"{1000 * t_replay / max(replays, 1):.2f} ms/replay, {1000 * t_replay / n:.2f} "
          "ms/unit")
    if args.run_dir:
        import tempfile

        from containmentbench.audit.study import audit_study
        with tempfile.TemporaryDirectory() as out:
            log = io.StringIO()
            t = time.perf_counter()
            info = audit_study(args.run_dir, pol, emb, replay=True, out=out, log=log)
            dt = time.perf_counter() - t
        print(f"study audit {args.run_dir}: {info['rollouts']} rollouts, "
              f"{1000 * dt / max(info['rollouts'], 1):.2f} ms/unit incl. {info['replays']} "
              f"replays (warm embedding cache); {log.getvalue().strip()}")


if __name__ == "__main__":
    main()
