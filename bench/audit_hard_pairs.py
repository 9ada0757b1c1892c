"""Hard pairs through the auditor, old scoring beside new (issue 34 items 2-3).

The cases (``tests/audit/data/hard_pairs_{dev,heldout,extra}.jsonl``, written by hand for
issue 34: organisations and wording of their own; explicit copies and paraphrases that keep
none of the page's entities as positives; topical overlap, coincidental numbers and dates,
user-dictated common knowledge, quotes from trusted documents and unrelated sinks as
negatives) are run through the auditor's own DCPG, scoring and verdict
(:mod:`containmentbench.audit.hard_pairs`), explicit tiers only (no replay, no judge), once
with the scoring before issue 34 and once with the current one, side by side in one run.
The thresholds were chosen on the dev half only; ``extra`` (values and single words shared
with the page but absent from the trusted context, identifiers in long sinks) was written
and run once after they were fixed; ``round2`` (60 cases by another hand, paraphrases of one
sentence and of several) was written before the clause units, the semantic coverage and the
trusted-explains rule of Tiers 3-4 were decided and run once after they were. Printed: P/R/F1, flagged counts per kind, and the
semantic AUC (paraphrase positives against topical-overlap and dictated-knowledge
negatives) of the old score (best cosine to the page or a chunk) and the new one (its margin
over the best cosine to the trusted context).

    python bench/audit_hard_pairs.py [--split dev|heldout|extra|round2|both] [--cases]
"""

from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def main() -> None:
    from containmentbench.audit.embed import Embedder
    from containmentbench.audit.hard_pairs import audit_cases, load_cases, prf, semantic_auc
    from containmentbench.audit.policy import load_audit_policy

    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "heldout", "extra", "round2", "both"), default="dev")
    ap.add_argument("--cases", action="store_true", help="one line per case")
    a = ap.parse_args()
    splits = ("dev", "heldout") if a.split == "both" else (a.split,)
    pol, emb = load_audit_policy(), Embedder()
    for split in splits:
        cases = load_cases(ROOT / "tests" / "audit" / "data" / f"hard_pairs_{split}.jsonl")
        print(f"== {split}: {len(cases)} cases")
        for name, old in (("old", True), ("new", False)):
            rows = audit_cases(cases, pol, emb, old=old)
            m = prf(rows)
            print(f"{name}: P {m['precision']:.3f} R {m['recall']:.3f} F1 {m['f1']:.3f} "
                  f"(tp {m['tp']} fp {m['fp']} fn {m['fn']}); semantic AUC: old score "
                  f"{semantic_auc(rows, 'sem_old'):.3f}, new score "
                  f"{semantic_auc(rows, 'sem_new'):.3f}")
            by: dict[str, list[dict]] = defaultdict(list)
            for r in rows:
                by[r["kind"]].append(r)
            for kind, rs in sorted(by.items()):
                tiers = sorted({str(r["tier"]) for r in rs if r["flagged"]})
                print(f"   {kind:20s} flagged {sum(r['flagged'] for r in rs)}/{len(rs)} "
                      f"{' '.join(tiers)}")
            if a.cases and not old:
                for r in rows:
                    print(f"   {r['id']:28s} label {r['label']} tier {r['tier']!s:9s} "
                          f"cos {r['sem_old']:.3f} margin {r['sem_new']:.3f}")


if __name__ == "__main__":
    main()
