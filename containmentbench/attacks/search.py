"""The bounded adaptive candidate search (paper 000 §6.3, Appendix B).

Per restart: ``roots`` strategies drawn from the configured ten (seeded by ``split_seed`` and
the restart) give the root templates; each depth asks the backend for ``branching`` rewrites
of every frontier candidate (attacks/mutation.py), evaluates the new ones with one target
query each on a development scenario (rotating over the development clusters and the search
seeds) under ``optimized_for``, and keeps the ``width`` best of parents and children. The
only feedback is the funnel stage of each query (K2+F1). A target-preserving search discards
rewrites that drop the exact action slot before they cost a query. The budget,
``max_queries_per_restart``, is checked before every query and recounted from the log.

Every query and rewrite goes through the append-only log (attacks/querylog.py), so a killed
search resumes where it stopped and reaches the same candidates as an uninterrupted run.
The ``freeze_top`` best candidates over all restarts (mean stage, then goal-matched commits,
then sha256) are the search's result.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.attacks import mutation as MU
from containmentbench.attacks import strategies as ST
from containmentbench.attacks.derive import derived_scenario
from containmentbench.attacks.querylog import LOG, QueryLog
from containmentbench.attacks.settings import Adaptive, digest, settings, variant
from containmentbench.canonical import canonical_json, derive_rng
from containmentbench.scenarios.model import Scenario

RESULT = "candidates.json"


def _rank(c: dict[str, Any]) -> tuple[float, int, str]:
    stages = c["stages"]
    mean = sum(stages) / len(stages) if stages else -1.0
    return (-mean, -sum(1 for s in stages if s == 5), c["sha256"])


class Search:
    """One bounded search: ``search`` names the protocol's variant
    (:func:`containmentbench.attacks.settings.variant`: ``transfer``, ``target`` or
    ``defense-<name>``), which fixes the defense it queries and whether it is
    target-preserving; every bound is the study's."""

    def __init__(self, data: dict[str, Any], dev: list[Scenario], out: Path, runner: Any,
                 search: str = "target") -> None:
        self.data, self.A = data, settings(data)
        self.V = variant(data, search)
        self.dev = dev
        self.runner = runner
        self.log = QueryLog(Path(out) / LOG, digest(data, search))
        self.suite = f"{data['study']['name']}.search"
        self.rejected = 0

    # ---------------------------------------------------------------- queries
    def _evaluate(self, cands: list[dict[str, Any]], r: int, q: int,
                  evaluated: dict[str, dict[str, Any]]) -> int:
        """One target query per candidate, in order, while the budget lasts; returns the next
        query index of the restart."""
        A: Adaptive = self.A
        plan = []
        for c in cands:
            if q >= A.max_queries_per_restart:
                break
            s = self.dev[(q + 7 * r) % len(self.dev)]
            seed = A.search_seeds[q % len(A.search_seeds)]
            key = f"r{r}/q{q:03d}"
            self.log.start(key, r, {"candidate": c["sha256"], "scenario": s.id, "seed": seed})
            plan.append((key, c, s, seed))
            q += 1
        todo = [(key, c, s, seed) for key, c, s, seed in plan if key not in self.log.done]
        if todo:
            items = [(derived_scenario(s, c, self.suite, self.V.policy_family, "search"),
                      seed) for _, c, s, seed in todo]
            results = self.runner.rollouts(items, self.V.optimized_for)
            for (key, _, _, _), res in zip(todo, results, strict=True):
                # F1: the funnel stage is all the search keeps (flags logged for audit)
                self.log.finish(key, {"stage": res["fn_stage"],
                                      "funnel": {k: v for k, v in res.items()
                                                 if k.startswith("fn_")}})
        for key, c, _s, _ in plan:
            rec = evaluated.setdefault(c["sha256"], {**c, "stages": [], "queries": []})
            rec["stages"].append(self.log.done[key]["stage"])
            rec["queries"].append(key)
        return q

    # ---------------------------------------------------------------- rewrites
    def _children(self, parents: list[dict[str, Any]], r: int, depth: int,
                  seen: set[str]) -> list[dict[str, Any]]:
        A = self.A
        knowledge = {"policy_family": self.V.policy_family}
        keys, reqs = [], []
        for p in parents:
            for b in range(A.branching):
                key = f"r{r}/d{depth}/{p['sha256'][:16]}/{b}"
                keys.append((key, p))
                if key not in self.log.mutations:
                    reqs.append((key, MU.request(p, b, A.search_seeds[0], knowledge,
                                                 self.V.target_preserving)))
        for (key, _), comp in zip(reqs, self.runner.generate([q for _, q in reqs]),
                                  strict=True):
            tmpl, why = MU.parse_rewrite(comp.text)
            if tmpl is not None and self.V.target_preserving \
                    and not ST.target_preserving(tmpl):
                why = "drops the exact target action (target-preserving search)"
            self.log.mutation(key, {"reply": comp.text, "template": None if why else tmpl,
                                    "rejected": why})
        out = []
        for key, p in keys:
            rec = self.log.mutations[key]
            if rec["rejected"]:
                self.rejected += 1
                continue
            c = MU.candidate(p["strategy"], rec["template"], p["sha256"], r, depth)
            if c["sha256"] not in seen:
                seen.add(c["sha256"])
                out.append(c)
        return out

    # ---------------------------------------------------------------- tree
    def run(self) -> dict[str, Any]:
        A = self.A
        restarts, pool = [], {}
        for r in range(A.restarts):
            rng = derive_rng("adaptive-roots", A.split_seed, r)
            order = [A.strategies[int(i)] for i in rng.permutation(len(A.strategies))]
            frontier = [MU.candidate(s, ST.root_template(s), None, r, 0)
                        for s in order[:A.roots]]
            seen = {c["sha256"] for c in frontier}
            evaluated: dict[str, dict[str, Any]] = {}
            q = self._evaluate(frontier, r, 0, evaluated)
            frontier = sorted((evaluated[c["sha256"]] for c in frontier
                               if c["sha256"] in evaluated), key=_rank)
            for depth in range(1, A.depth + 1):
                if q >= A.max_queries_per_restart or not frontier:
                    break
                kids = self._children(frontier, r, depth, seen)
                q = self._evaluate(kids, r, q, evaluated)
                scored = [evaluated[c["sha256"]] for c in frontier + kids
                          if c["sha256"] in evaluated]
                frontier = sorted(scored, key=_rank)[:A.width]
            restarts.append({"restart": r, "roots": order[:A.roots], "queries": q,
                             "evaluated": len(evaluated)})
            for sha, c in evaluated.items():
                if sha in pool:  # the same text in two restarts: one candidate, all queries
                    pool[sha]["stages"] += c["stages"]
                    pool[sha]["queries"] += c["queries"]
                else:
                    pool[sha] = {**c, "stages": list(c["stages"]),
                                 "queries": list(c["queries"])}
        ranked = sorted(pool.values(), key=_rank)
        budget = {f"r{r}": self.log.count(r) for r in range(A.restarts)}
        return {"settings_sha256": self.log.digest, "condition": f"{A.knowledge}+{A.feedback}",
                "search": self.V.name, "optimized_for": self.V.optimized_for,
                "target_preserving": self.V.target_preserving,
                "restarts": restarts, "queries_per_restart": budget,
                "max_queries_per_restart": A.max_queries_per_restart,
                "rejected_rewrites": self.rejected, "evaluated": ranked,
                "final": [c["sha256"] for c in ranked[:A.freeze_top]]}


def write_result(out: Path, result: dict[str, Any], force: bool = False) -> str:
    """``candidates.json`` beside the log: kept when identical, never silently replaced."""
    from containmentbench.integrity import writer

    return writer.write_json(Path(out) / RESULT, json.loads(canonical_json(result)),
                             kind="adaptive-search", force=force, once=True)
