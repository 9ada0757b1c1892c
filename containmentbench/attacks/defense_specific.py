"""Defense-specific optimization after the staged qualification (paper 000 §6.3: "Defense-
specific optimization is attempted only if the held-out stage retains exact target
proposals and goal-matched commits across more than one domain").

When the qualification passed, every defense of ``study.adaptive.defense_specific`` gets
its own bounded search (:class:`containmentbench.attacks.search.Search`, variant
``defense-<name>``): target-preserving, the policy family of that defense as K2 knowledge,
its target queries run under that defense, and every bound of the study's search (roots,
branching, width, depth, restarts, queries per restart; config/bounds.py). Its frozen
candidates are replayed on the held-out clusters under that defense (attacks/replay.py, the
defense-specific rows of Table 18). When the qualification stopped, nothing is searched and
the decision says where the protocol stopped and why.

Layout under the output folder: ``decision.json``, and per defense ``<name>/search/``
(query log, candidates.json) and ``<name>/frozen/`` (frozen candidates, as for every
search). A killed run resumes from each search's log, as every search does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from containmentbench.canonical import canonical_json
from containmentbench.errors import BenchError
from containmentbench.scenarios.model import Scenario

KIND = "adaptive-defense-specific"
DECISION = "decision.json"


def run(data: dict[str, Any], qualification: dict[str, Any], dev: list[Scenario], out: Path,
        runner: Any, force: bool = False) -> dict[str, Any]:
    """The searches (when the qualification passed) and the decision record."""
    from containmentbench.attacks.frozen import render, write_frozen
    from containmentbench.attacks.search import Search, write_result
    from containmentbench.attacks.settings import settings
    from containmentbench.integrity import writer

    A = settings(data)
    out = Path(out)
    if not qualification.get("proceed_to_defense_specific"):
        decision: dict[str, Any] = {
            "attempted": False, "defenses": {},
            "reason": f"the qualification stopped at {qualification.get('stopped_at')}: "
                      f"{qualification.get('stop_reason')}"}
    elif not A.defense_specific:
        decision = {"attempted": False, "defenses": {},
                    "reason": "no defense listed in study.adaptive.defense_specific"}
    else:
        per: dict[str, Any] = {}
        for d in A.defense_specific:
            sdir, fdir = out / d / "search", out / d / "frozen"
            writer.ensure_dir(sdir, "adaptive-search")
            result = Search(data, dev, sdir, runner, f"defense-{d}").run()
            write_result(sdir, result, force)
            write_frozen(fdir, render(result), force)
            per[d] = {"queries_per_restart": result["queries_per_restart"],
                      "evaluated": len(result["evaluated"]), "frozen": result["final"],
                      "rejected_rewrites": result["rejected_rewrites"]}
        decision = {"attempted": True, "defenses": per,
                    "reason": "the qualification passed (§6.3)"}
    writer.write_json(out / DECISION, json.loads(canonical_json(decision)), kind=KIND,
                      force=force)
    return decision


def read_decision(folder: Path) -> dict[str, Any]:
    path = Path(folder) / DECISION
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BenchError(f"cannot read the defense-specific decision ({exc})",
                         file=str(path)) from None
