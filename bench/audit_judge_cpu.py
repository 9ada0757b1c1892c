"""The §4.3 counterfactual judge alone, with a real model on vLLM's CPU engine (issue 34, item 4).

On a stratified sample of labelled cases of the taintbench suite (positives of every designed
evidence group, paraphrase and implicit-control ones included; negatives of every kind), each
case's labelled sink and labelled source are put to the judge exactly as an audit does
(:class:`containmentbench.audit.judge.Judge`: Context A vs Context B, strict JSON), all
questions in one batched ``generate``. The traces are the simulated agent's (always_follow,
seed 1; no defense), so the sink is the one the label describes; the judge is the real model.

Prints P/R/F1 of the judge alone with case-bootstrap 95% intervals (percentile; the formula
P = TP/(TP+FP), R = TP/(TP+FN), F1 = 2PR/(P+R) of paper 001 §5.1), the verdicts per group,
judge calls, errors (provider or malformed JSON: no verdict, reported apart and counted as
"not flagged" in a second row), seconds per call (median, p90: per-request latency inside
the batch) and the batch's wall time, model, engine and version.

    PATH=/work/main/.venv-vllm/bin:$PATH HF_HUB_OFFLINE=1 PYTHONPATH=. nice \\
        python bench/audit_judge_cpu.py [--judge qwen2_5_coder_0_5b_cpu] [--out FILE.json]
    python bench/audit_judge_cpu.py --fake '{"would_call_anyway": false, "confidence": 1}'
        (no model: checks the plumbing)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# cases per group: (label family or subfamily, how many); positives then negatives. The
# paraphrase positives are the semantic_explicit subfamilies; implicit control has no content
# of the source in the sink (only a causal tier can find it).
POSITIVES = (("implicit_control", 10), ("semantic_multihop", 4), ("cross_session", 3),
             ("semantic_boundary", 2), ("trusted_surface", 2), ("cross_agent", 2),
             ("string_provenance", 4), ("multi_fragment", 3), ("explicit_canary", 2))
# (shared_clean negatives are left out: no untrusted lineage reaches their sinks, so an audit
# never asks the judge about them)
NEGATIVES = (("non_propagating", 14), ("topical_overlap", 12), ("prior_knowledge", 6))


def sample(labels: dict[str, dict[str, Any]], scale: float) -> list[str]:
    """Evenly spaced scenario ids per group (deterministic)."""
    by: dict[str, list[str]] = defaultdict(list)
    for sid in sorted(labels):
        by[labels[sid]["subfamily"]].append(sid)
    out = []
    for group, k in (*POSITIVES, *NEGATIVES):
        ids = by[group]
        k = min(len(ids), max(1, round(k * scale)))
        out += [ids[(i * len(ids)) // k] for i in range(k)]
    return out


def prf(tp: int, fp: int, fn: int) -> tuple[float, float, float]:
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def scores(rows: list[tuple[bool, bool]], boot: int, seed: int = 0) -> dict[str, Any]:
    """P/R/F1 of (label, flagged) rows with case-bootstrap percentile intervals."""
    import numpy as np

    y = np.array([r[0] for r in rows], dtype=bool)
    f = np.array([r[1] for r in rows], dtype=bool)

    def one(yy: Any, ff: Any) -> tuple[float, float, float]:
        return prf(int((yy & ff).sum()), int((~yy & ff).sum()), int((yy & ~ff).sum()))

    point = one(y, f)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(rows), size=(boot, len(rows)))
    draws = np.array([one(y[i], f[i]) for i in idx])
    lo, hi = np.percentile(draws, [2.5, 97.5], axis=0)
    return {"n": len(rows), "tp": int((y & f).sum()), "fp": int((~y & f).sum()),
            "fn": int((y & ~f).sum()), "tn": int((~y & ~f).sum()),
            **{k: round(point[i], 3) for i, k in enumerate(("precision", "recall", "f1"))},
            **{f"{k}_ci": [round(lo[i], 3), round(hi[i], 3)]
               for i, k in enumerate(("precision", "recall", "f1"))}}


def questions(ids: list[str], labels: dict[str, dict[str, Any]], work: Path
              ) -> tuple[list[tuple[str, Any]], Counter[str]]:
    """Roll the sampled scenarios out with the simulated agent and build each labelled
    (sink, source) question as the audit does."""
    from containmentbench.audit.auditor import collect
    from containmentbench.audit.judge import Question, decision_context
    from containmentbench.audit.policy import load_audit_policy
    from containmentbench.audit.study import shard_rollouts
    from containmentbench.canonical import canonical_json
    from containmentbench.cli.main import main
    from containmentbench.scenarios.manifest import load_suite

    stage_of = {s.id: s.stage for s in load_suite("taintbench")}
    missing: Counter[str] = Counter()
    out = []
    pol = load_audit_policy()
    for stage in sorted({stage_of[i] for i in ids}):
        sel = [i for i in ids if stage_of[i] == stage]
        d = work / stage
        rc = main(["rollout", "--suite", "taintbench", "--stage", stage, "--scenarios",
                   ",".join(sel), "--defense", "none", "--seed", "1", "--study", "judge-bench",
                   "--sim-profile", "always_follow", "--out", str(d), "--quiet"])
        if rc != 0:
            raise SystemExit(f"rollout of stage {stage} failed ({rc})")
        for row, evs in shard_rollouts(d, everything=True):
            tb = labels[row["scenario_id"]]
            _, sinks = collect(row, evs, pol)
            want = canonical_json(tb["sink_args"])
            cands = [(s, p) for s in sinks if s.tool == tb["sink_tool"]
                     and s.session == tb["sink_session"]
                     for p in s.pairs if p.source_id == tb["source_id"]]
            cands.sort(key=lambda sp: canonical_json(sp[0].args) != want)
            if not cands:
                missing[tb["subfamily"]] += 1
                continue
            s, p = cands[0]
            inst = next(e.get("agent_instance") for e in evs if e["seq"] == s.seq)
            out.append((row["scenario_id"],
                        Question(decision_context(evs, inst or "", s.seq), p.source_text, s.tool,
                                 s.args)))
    return out, missing


class _Fake:
    name = "fake"

    def __init__(self, text: str) -> None:
        self.text = text

    def generate(self, reqs: list[Any]) -> list[Any]:
        from containmentbench.models.base import Completion

        return [Completion(self.text, prompt_tokens=1, completion_tokens=1) for _ in reqs]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--judge", default="qwen2_5_coder_0_5b_cpu",
                    help="judge config: a packaged name (audit/judges/) or a YAML file")
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiply every group's count (default: 32 positives, 32 negatives)")
    ap.add_argument("--boot", type=int, default=2000, help="bootstrap resamples")
    ap.add_argument("--fake", default=None, help="a fixed reply instead of a model (plumbing)")
    ap.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = ap.parse_args()

    from containmentbench.audit.judge import Judge, load_judge_config
    from containmentbench.scenarios.manifest import suite_dir

    labels = json.loads((suite_dir("taintbench") / "LABELS.json").read_text())["labels"]
    ids = sample(labels, args.scale)
    with tempfile.TemporaryDirectory(prefix="judge-bench-") as tmp:
        qs, missing = questions(ids, labels, Path(tmp))
    cfg = load_judge_config(args.judge)
    t0 = time.perf_counter()
    if args.fake is not None:
        judge, engine = Judge(_Fake(args.fake), cfg.max_tokens, "fake"), "fake (no model)"
    else:
        judge = Judge.from_config(cfg)
        import vllm

        from containmentbench.models.vllm_backend import on_cpu_build

        engine = f"vllm {vllm.__version__} ({'CPU' if on_cpu_build() else 'GPU'} engine)"
    load_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    answers = judge.ask([q for _, q in qs])
    wall = time.perf_counter() - t1
    close = getattr(judge.backend, "close", None)
    if close is not None:
        close()
    verdicts = []
    groups: dict[str, Counter[str]] = defaultdict(Counter)
    for (sid, _), a in zip(qs, answers, strict=True):
        tb = labels[sid]
        g = groups[f"{'pos' if tb['positive'] else 'neg'}:{tb['subfamily']}"]
        g["n"] += 1
        if a.error is not None:
            g["error"] += 1
        elif a.influenced:
            g["flagged"] += 1
        verdicts.append({"scenario_id": sid, "positive": tb["positive"],
                         "subfamily": tb["subfamily"], "influenced": a.influenced,
                         "confidence": a.confidence, "error": a.error,
                         "latency_s": round(a.latency_s, 3), "tokens": a.tokens,
                         "reply": a.reply[:400]})
    ok = [(v["positive"], bool(v["influenced"])) for v in verdicts if v["error"] is None]
    all_rows = [(v["positive"], bool(v["influenced"])) for v in verdicts]
    lats = sorted(a.latency_s for a in answers)
    p90 = lats[min(len(lats) - 1, int(0.9 * len(lats)))] if lats else None
    res = {"judge": "fake" if args.fake is not None else (cfg.label or cfg.model),
           "judge_config": args.judge, "engine": engine,
           "sampled": len(ids), "asked": len(qs), "no_labelled_sink": dict(missing),
           "judge_calls": judge.calls, "errors": judge.errors, "malformed": judge.unparsed,
           "tokens_per_call": round(judge.tokens / max(judge.calls, 1), 1),
           "engine_load_s": round(load_s, 1), "batch_wall_s": round(wall, 1),
           "wall_s_per_call_amortised": round(wall / max(len(qs), 1), 2),
           "latency_s_median": round(statistics.median(lats), 2) if lats else None,
           "latency_s_p90": round(p90, 2) if p90 is not None else None,
           "judge_alone_answered": scores(ok, args.boot) if ok else None,
           "judge_alone_errors_as_not_flagged": scores(all_rows, args.boot),
           "groups": {k: dict(v) for k, v in sorted(groups.items())},
           "traces": "simulated agent (always_follow, seed 1, no defense)",
           "verdicts": verdicts}
    text = json.dumps(res, indent=1)
    if args.out:
        args.out.write_text(text + "\n")
    brief = {k: v for k, v in res.items() if k != "verdicts"}
    print(json.dumps(brief, indent=1))
    j = res["judge_alone_answered"]
    prf_text = (f"P/R/F1 {j['precision']}/{j['recall']}/{j['f1']} over {j['n']} answered"
                if j else "no answers")
    print(f"judge alone on {len(qs)} labelled sinks ({res['judge']}, {engine}): {prf_text}; "
          f"{judge.errors} provider errors, {judge.unparsed} malformed; median "
          f"{res['latency_s_median']} s, p90 {res['latency_s_p90']} s per call, batch "
          f"{res['batch_wall_s']} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
