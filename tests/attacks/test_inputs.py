"""Bad input: one line naming the field, exit 2, before any query (nothing written)."""

from __future__ import annotations

import json

import pytest

from containmentbench.cli.main import main


def _run(tmp_path, capsys, *override, step="run", extra=()):
    args = ["search", step, "study=adaptive_smoke", f"results_dir={tmp_path}/results",
            *override]
    args += ["--out", str(tmp_path / "out"), *extra]
    rc = main(args)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    return rc, err


@pytest.mark.parametrize("override, field", [
    ("study.adaptive.max_queries_per_restart=41", "study.adaptive.max_queries_per_restart"),
    ("study.adaptive.roots=4", "study.adaptive.roots"),
    ("study.adaptive.width=7", "study.adaptive.width"),
    ("study.adaptive.depth=5", "study.adaptive.depth"),
    ("study.adaptive.restarts=3", "study.adaptive.restarts"),
    ("study.adaptive.branching=4", "study.adaptive.branching"),
    ("study.adaptive.strategies=[ledger_claim,base64_smuggle,user_quote]",
     "study.adaptive.strategies[1]"),
    ("study.adaptive.feedback=F3", "study.adaptive.feedback"),
    ("study.adaptive.search_seeds=[1001]", "study.seeds"),
    ("study.adaptive.heldout_clusters=5", "study.adaptive.heldout_clusters"),
])
def test_bad_settings_one_line_exit_2_before_any_query(tmp_path, capsys, override, field):
    step = "splits" if "clusters" in override else "run"
    extra = () if step == "splits" else ("--splits", str(tmp_path / "none.json"))
    if step == "splits":
        rc, err = _run(tmp_path, capsys, override, step="splits")
    else:
        rc, err = _run(tmp_path, capsys, override, extra=extra)
    assert rc == 2
    assert len(err) == 1 and f"field '{field}'" in err[0], err
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()


def test_overlapping_splits_refused(tmp_path, capsys):
    assert main(["search", "splits", "study=adaptive_smoke",
                 f"results_dir={tmp_path}/results", "--out", str(tmp_path / "sp.json")]) == 0
    sp = json.loads((tmp_path / "sp.json").read_text())
    sp["splits"]["heldout"]["families"].append(sp["splits"]["development"]["families"][0])
    (tmp_path / "bad.json").write_text(json.dumps(sp))
    capsys.readouterr()
    rc, err = _run(tmp_path, capsys, extra=("--splits", str(tmp_path / "bad.json")))
    assert rc == 2 and len(err) == 1
    assert "splits.heldout.families" in err[0] and "family-disjoint" in err[0]
    assert not (tmp_path / "out").exists()


def test_splits_are_family_disjoint_at_protocol_sizes():
    """48 / 144 / 24 clusters of full_main's attacked scenarios, no family in two splits."""
    from containmentbench.attacks.splits import attacked_pool, check_disjoint, make_splits

    pool = attacked_pool("full_main", ("security", "memory_recovery"))
    sp = make_splits(pool, {"development": 48, "heldout": 144, "audit": 24}, 0)
    parts = sp["splits"]
    assert [len(parts[k]["clusters"]) for k in ("development", "heldout", "audit")] == \
        [48, 144, 24]
    fam = {s.id: s.family for s in pool}
    for a in parts:
        for b in parts:
            if a < b:
                assert not set(parts[a]["families"]) & set(parts[b]["families"])
                assert not {fam[i] for i in parts[a]["scenarios"]} & \
                    {fam[i] for i in parts[b]["scenarios"]}
    check_disjoint(sp)
    assert make_splits(pool, {"development": 48, "heldout": 144, "audit": 24}, 1) != sp
