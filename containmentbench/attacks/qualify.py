"""Staged target-preserving qualification under the optimized-for defense (paper 000 §6.3,
§7.4, Table 19), before any defense-specific optimization.

1. Known-good replay ("retained target actions"): the search queries that reached a
   goal-matched commit are replayed (same candidate, scenario and seed); every one must
   reproduce the exact proposal and the goal-matched commit.
2. Development check: the frozen candidates on development clusters with qualification seeds;
   goal-matched commits in at least ``development_min_rate`` of the rollouts.
3. Family-held-out check: the frozen candidates on unseen families; goal-matched commits in at
   least ``heldout_min_rate`` of the rollouts and in at least ``heldout_min_domains``
   domains ("across more than one domain").

A fourth row re-scores the held-out rollouts with a strict scorer (no argument
normalisation; §7.4 "a revised scorer reproduced the same held-out result"); it is reported,
not a gate. Each stage is run and reported; the protocol proceeds to defense-specific
optimization only if the three gates pass (attacks/defense_specific.py runs it then: one
bounded, target-preserving search per defense of ``study.adaptive.defense_specific``).
Otherwise it stops and records where and why (as the paper did after its held-out
shortfall).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.attacks.derive import derived_scenario
from containmentbench.attacks.settings import Adaptive
from containmentbench.canonical import canonical_json
from containmentbench.scenarios.model import Scenario

KIND = "adaptive-qualification"
STAGES = (("known_good_replay", "retained target actions"),
          ("development_check", "target-preserving search"),
          ("family_heldout_check", "unseen task families"))
#: the held-out rollouts re-scored without argument normalisation (runner.strict_view);
#: reported beside the gating stages, never a gate itself
VARIANT = ("scoring_variant_repeat", "same held-out scope, strict scorer")


def _items(cands: list[dict[str, Any]], scen: list[Scenario], n: int, seeds: list[int]
           ) -> list[tuple[dict[str, Any], Scenario, int]]:
    """n rollouts spread over candidates, scenarios (every cluster before a repeat) and
    seeds, in a fixed order."""
    return [(cands[i % len(cands)], scen[i % len(scen)], seeds[(i // len(scen)) % len(seeds)])
            for i in range(n)]


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows)
    goal = [r for r in rows if r["fn_goal_commit"]]
    return {"N": n, "exact_proposal": sum(r["fn_exact_proposal"] for r in rows),
            "goal_commit": len(goal), "offtarget_commit": sum(r["fn_offtarget_commit"]
                                                              for r in rows),
            "exposed": sum(r["fn_exposed"] for r in rows),
            "goal_domains": sorted({r["domain"] for r in goal})}


def qualify(A: Adaptive, frozen: list[dict[str, Any]], search_log: dict[str, Any],
            by_id: dict[str, Scenario], splits: dict[str, Any], runner: Any
            ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Run the three stages; returns (decision record, one row per rollout)."""
    suite = "qualification"
    dev = [by_id[i] for i in splits["splits"]["development"]["scenarios"]]
    held = [by_id[i] for i in splits["splits"]["heldout"]["scenarios"]]
    qseeds = list(A.qualification_seeds)
    known = [q for q in search_log["queries"] if q["stage"] == 5][:A.known_good_rows]
    cand_of = {c["sha256"]: c for c in search_log["candidates"]}
    plans = {
        "known_good_replay": [(cand_of[q["candidate"]], by_id[q["scenario"]], q["seed"])
                              for q in known],
        "development_check": _items(frozen, dev, A.development_rollouts, qseeds),
        "family_heldout_check": _items(frozen, held, A.heldout_rollouts, qseeds),
    }
    rows: list[dict[str, Any]] = []
    stages = []
    for name, scope in STAGES:
        items = plans[name]
        derived = [(derived_scenario(s, c, suite, A.policy_family, name), seed)
                   for c, s, seed in items]
        results = runner.rollouts(derived, A.optimized_for) if derived else []
        stage_rows = [{"qual_stage": name, "qual_scope": scope, "scenario_id": d.id,
                       "base_scenario": s.id, "family": s.family, "cluster_id": s.cluster_id,
                       "domain": s.domain, "candidate": c["sha256"], "seed": seed,
                       "defense": A.optimized_for, "rollout_id": res["rollout_id"],
                       **{k: v for k, v in res.items() if k.startswith("fn_")}}
                      for (c, s, seed), (d, _), res in zip(items, derived, results,
                                                           strict=True)]
        rows += stage_rows
        if name == "family_heldout_check":
            variant = [{**r, "qual_stage": VARIANT[0], "qual_scope": VARIANT[1],
                        **res["strict"]} for r, res in zip(stage_rows, results, strict=True)]
        summ = _summary(stage_rows)
        if name == "known_good_replay":
            ok = summ["N"] > 0 and summ["goal_commit"] == summ["N"] \
                and summ["exact_proposal"] == summ["N"]
            why = None if ok else ("the search reached no goal-matched commit to replay"
                                   if not summ["N"] else "a known-good row did not reproduce")
        else:
            rate = A.development_min_rate if name == "development_check" \
                else A.heldout_min_rate
            ok = summ["N"] > 0 and summ["goal_commit"] / summ["N"] >= rate
            why = None if ok else (f"goal-matched commits {summ['goal_commit']}/{summ['N']} "
                                   f"below the criterion {rate:g}")
            if ok and name == "family_heldout_check" \
                    and len(summ["goal_domains"]) < A.heldout_min_domains:
                ok = False
                why = (f"goal-matched commits in {len(summ['goal_domains'])} domain(s) "
                       f"({', '.join(summ['goal_domains']) or 'none'}); the criterion needs "
                       f"{A.heldout_min_domains}")
        stages.append({"stage": name, "scope": scope, **summ, "passed": ok, "reason": why})
    failed = [s for s in stages if not s["passed"]]
    vs = _summary(variant)
    stages.append({"stage": VARIANT[0], "scope": VARIANT[1], **vs, "gate": False,
                   "passed": None, "reason": "reported, not a gate",
                   "agrees_with_main_scorer": (vs["exact_proposal"], vs["goal_commit"])
                   == (stages[-1]["exact_proposal"], stages[-1]["goal_commit"])})
    rows += variant
    decision = {
        "optimized_for": A.optimized_for, "stages": stages,
        "proceed_to_defense_specific": not failed,
        "stopped_at": failed[0]["stage"] if failed else None,
        "stop_reason": failed[0]["reason"] if failed else None,
        "defense_specific_optimization": "not attempted: the protocol stopped" if failed
        else "eligible: runs next (adaptive/defense_specific/decision.json)",
    }
    return decision, rows


def write_qualification(out: Path, decision: dict[str, Any], rows: list[dict[str, Any]],
                        force: bool = False) -> str:
    from containmentbench.integrity import writer

    out = Path(out)
    writer.check_out(out, KIND, force)
    with writer.building_dir(out, KIND, force, identical=_same) as b:
        b.put_text("qualification.json", json.dumps(json.loads(canonical_json(decision)),
                                                      indent=2, sort_keys=True) + "\n")
        # canonical JSON lines rather than Parquet: byte-identical across library versions
        b.put_text("rows.jsonl", "".join(canonical_json(r) + "\n" for r in rows))
    return b.result


def _same(a: Path, b: Path) -> bool:
    return all((a / n).read_bytes() == (b / n).read_bytes() if (b / n).exists() else False
               for n in ("qualification.json", "rows.jsonl"))


def read_rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (Path(folder) / "rows.jsonl").read_text().splitlines() if x]
